// The pieces between generated ids and streamed text: UTF-8 holdback, stop strings held back while they
// could still complete, the windowed detokenizer, and the ChoiceDecoder that chains them (with a fake
// byte-level decoder: id = one byte, so multi-byte characters split across tokens on purpose).
#include <gtest/gtest.h>

#include "dew/serve/choice_decoder.h"
#include "dew/serve/incremental_detokenizer.h"
#include "dew/serve/stop_matcher.h"
#include "dew/serve/utf8_holdback.h"

using dew::serve::ChoiceDecoder;
using dew::serve::StopMatcher;
using dew::serve::Utf8Holdback;

namespace {

// Token id = one byte (0..255); 256 = "<eot>" decoded as nothing special (an end-of-turn id in tests);
// 300 = "▁x" which SentencePiece-style decodes as " x" except at the start of the decoded span.
std::string fake_decode(std::span<const std::int32_t> ids) {
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 256) out += static_cast<char>(ids[i]);
    else if (ids[i] == 256) out += "<eot>";
    else if (ids[i] == 300) out += i == 0 ? "x" : " x";
  }
  return out;
}

std::vector<std::int32_t> bytes_of(const std::string& text) {
  std::vector<std::int32_t> ids;
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

}  // namespace

TEST(ServeUtf8, HoldsSplitCharactersUntilWhole) {
  Utf8Holdback holdback;
  std::string euro = "\xE2\x82\xAC";  // €
  EXPECT_EQ(holdback.push("a" + euro.substr(0, 1)), "a");
  EXPECT_TRUE(holdback.holding());
  EXPECT_EQ(holdback.push(euro.substr(1, 1)), "");
  EXPECT_EQ(holdback.push(euro.substr(2) + "b"), euro + "b");
  EXPECT_FALSE(holdback.holding());
  std::string emoji = "\xF0\x9F\x98\x80";
  std::string out;
  for (char c : emoji) out += holdback.push(std::string(1, c));
  EXPECT_EQ(out, emoji);
}

TEST(ServeUtf8, InvalidBytesBecomeReplacementCharacters) {
  Utf8Holdback holdback;
  EXPECT_EQ(holdback.push("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(holdback.push("\xE2\x82" "c"), "\xEF\xBF\xBD" "c");  // a sequence broken by an ASCII byte
  EXPECT_EQ(holdback.push("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate: never valid
  EXPECT_EQ(holdback.push("\xE2\x82"), "");
  EXPECT_EQ(holdback.flush(), "\xEF\xBF\xBD");  // unfinished at the end
  EXPECT_EQ(dew::serve::valid_utf8("ok\xC3"), "ok\xEF\xBF\xBD");
  EXPECT_EQ(dew::serve::utf8_length("a\xE2\x82\xAC" "b"), 3u);
}

TEST(ServeStopMatcher, CutsAtTheStopAndHoldsPossibleStarts) {
  StopMatcher matcher({"</end>"});
  auto a = matcher.push("Hello </");
  EXPECT_EQ(a.text, "Hello ");  // "</" could begin "</end>"
  EXPECT_FALSE(a.stopped);
  auto b = matcher.push("en");
  EXPECT_EQ(b.text, "");
  auto c = matcher.push("d> world");
  EXPECT_EQ(c.text, "");
  EXPECT_TRUE(c.stopped);
  EXPECT_EQ(matcher.push("more").text, "");
  EXPECT_EQ(matcher.flush(), "");
}

TEST(ServeStopMatcher, ReleasesAFalseStartAndPicksTheEarliestStop) {
  StopMatcher matcher({"STOP", "xy"});
  EXPECT_EQ(matcher.push("aST").text, "a");
  EXPECT_EQ(matcher.push("OX").text, "STOX");
  auto piece = matcher.push("12xy3STOP");
  EXPECT_EQ(piece.text, "12");
  EXPECT_TRUE(piece.stopped);

  StopMatcher unfinished({"STOP"});
  EXPECT_EQ(unfinished.push("abcSTO").text, "abc");
  EXPECT_EQ(unfinished.flush(), "STO");  // the end came first: it was text after all

  StopMatcher none({});
  EXPECT_EQ(none.push("anything").text, "anything");
}

TEST(ServeDetokenizer, WindowKeepsSpacesThatDependOnNeighbours) {
  dew::serve::IncrementalDetokenizer alone(fake_decode);
  EXPECT_EQ(alone.push(300), "x");  // at the very start, as decode([x]) says
  EXPECT_EQ(alone.push(300), " x");
  EXPECT_EQ(alone.push('!'), "!");
  dew::serve::IncrementalDetokenizer after_prompt(fake_decode, {'a'});
  EXPECT_EQ(after_prompt.push(300), " x");  // continuing a prompt keeps the space
  // The sum of the pieces equals one decode of everything, for a long sequence (window slides, vector shrinks).
  dew::serve::IncrementalDetokenizer long_run(fake_decode, {'p'});
  std::string joined;
  std::vector<std::int32_t> all;
  for (int i = 0; i < 500; ++i) {
    std::int32_t id = i % 7 == 0 ? 300 : 'a' + i % 26;
    all.push_back(id);
    joined += long_run.push(id);
  }
  all.insert(all.begin(), 'p');
  EXPECT_EQ(joined, fake_decode(all).substr(1));
}

TEST(ServeChoiceDecoder, StreamsWholeCharactersAndCutsStops) {
  ChoiceDecoder decoder(fake_decode, {.end_ids = {256}, .stop = {"\n\n"}});
  std::string text;
  for (auto id : bytes_of("caf\xC3\xA9 ok\n\nnever")) {
    auto delta = decoder.push(id, -0.5f);
    // Every delta is valid UTF-8 on its own.
    EXPECT_EQ(dew::serve::valid_utf8(delta.text), delta.text);
    text += delta.text;
    if (decoder.stopped()) break;
  }
  EXPECT_TRUE(decoder.stopped());
  auto last = decoder.finish("length");
  text += last.text;
  EXPECT_EQ(text, "caf\xC3\xA9 ok");
  EXPECT_EQ(last.finish_reason, "stop");  // the stop string decides, whatever the engine says
}

TEST(ServeChoiceDecoder, EndOfTurnAddsNoTextAndHeldTextIsReleasedAtTheEnd) {
  ChoiceDecoder decoder(fake_decode, {.end_ids = {256}, .stop = {"STOP"}, .logprobs = true});
  std::string text;
  std::size_t entries = 0;
  for (auto id : bytes_of("abST")) {
    auto delta = decoder.push(id, -1.0f, std::vector<std::pair<std::int32_t, float>>{{'z', -2.0f}});
    text += delta.text;
    entries += delta.logprobs.size();
  }
  auto eot = decoder.push(256, -0.1f);
  EXPECT_TRUE(eot.text.empty());
  EXPECT_TRUE(eot.logprobs.empty());  // no log-probability entry for the end-of-turn token
  auto last = decoder.finish("stop");
  text += last.text;
  EXPECT_EQ(text, "abST");
  EXPECT_EQ(last.finish_reason, "stop");
  EXPECT_EQ(entries, 4u);
  EXPECT_EQ(decoder.tokens(), 5);
}

TEST(ServeChoiceDecoder, LogprobsCarryTokenTextBytesAndOffsets) {
  ChoiceDecoder decoder(fake_decode, {.logprobs = true});
  auto first = decoder.push('h', -0.25f, std::vector<std::pair<std::int32_t, float>>{{'h', -0.25f}, {'j', -1.5f}});
  ASSERT_EQ(first.logprobs.size(), 1u);
  EXPECT_EQ(first.logprobs[0].chosen.token, "h");
  EXPECT_FLOAT_EQ(first.logprobs[0].chosen.logprob, -0.25f);
  ASSERT_EQ(first.logprobs[0].top.size(), 2u);
  EXPECT_EQ(first.logprobs[0].top[1].token, "j");
  EXPECT_EQ(first.logprobs[0].text_offset, 0u);
  auto half = decoder.push(0xC3, -0.1f);
  EXPECT_EQ(half.logprobs[0].chosen.token, "\xEF\xBF\xBD");  // half a character: replaced in the text
  EXPECT_EQ(half.logprobs[0].chosen.bytes, "\xC3");          // and kept in the bytes
  EXPECT_EQ(half.logprobs[0].text_offset, 1u);
  decoder.push(0xA9, -0.1f);
  auto next = decoder.push('!', -0.1f);
  EXPECT_EQ(next.logprobs[0].text_offset, 2u);  // "hé" is two characters
  EXPECT_EQ(decoder.finish("length").finish_reason, "length");
}

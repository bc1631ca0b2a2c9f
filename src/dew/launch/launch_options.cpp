#include "dew/launch/launch_options.h"

#include <cmath>

#include "dew/core/error.h"
#include "dew/core/printable.h"

namespace dew::launch {

LaunchMode check_launch_options(const LaunchOptions& o, bool under_slurm) {
  if (o.command.empty()) {
    fail("dew launch needs a command after '--', e.g. dew launch --nproc 2 -- dew train lm --data tokens --out runs/a");
  }
  if (o.nproc && *o.nproc < 1) {
    fail("--nproc ", *o.nproc, " starts no process; give 1 or more");
  }
  if (o.hosts && o.hostfile) {
    fail("--hosts '", printable(*o.hosts), "' and --hostfile '", printable(*o.hostfile), "' both name the machines; give one of them");
  }
  const bool many_hosts = o.hosts || o.hostfile;
  if (o.nproc && many_hosts) {
    // --nproc is per machine in torchrun but a total elsewhere; one spelling per mode avoids guessing.
    fail("--nproc ", *o.nproc, " is for processes on this machine and cannot be combined with --hosts/--hostfile; use --processes-per-host K for K processes on each host");
  }
  if (o.slurm && (o.nproc || many_hosts)) {
    fail("--slurm takes the processes from srun (SLURM_NTASKS, SLURM_PROCID); drop --nproc/--hosts/--hostfile, or drop --slurm to start them here");
  }
  if (o.processes_per_host && !many_hosts) {
    fail("--processes-per-host ", *o.processes_per_host, " needs --hosts or --hostfile; on one machine use --nproc");
  }
  if (o.processes_per_host && *o.processes_per_host < 1) {
    fail("--processes-per-host ", *o.processes_per_host, " starts no process; give 1 or more");
  }
  if (o.master_port && (*o.master_port < 1 || *o.master_port > 65535)) {
    fail("--master-port ", *o.master_port, " is not a TCP port; give 1..65535");
  }
  if (o.master_addr && o.master_addr->empty()) {
    fail("--master-addr is empty; give the host name or address of rank 0's machine");
  }
  if (!std::isfinite(o.grace_seconds) || o.grace_seconds < 0 || o.grace_seconds > 1e6) {
    fail("--grace-seconds ", o.grace_seconds, " is not a usable grace period; give 0 to 1000000 seconds");
  }
  if (many_hosts) return LaunchMode::ssh;
  if (o.nproc) return LaunchMode::local;
  if (o.slurm || under_slurm) return LaunchMode::slurm;
  fail("dew launch needs --nproc N (processes on this machine), --hosts/--hostfile (over ssh), or --slurm (as a task of srun)");
}

}  // namespace dew::launch

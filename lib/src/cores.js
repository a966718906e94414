// The cores this process may use: the CPUs its affinity allows (taskset, a cpuset), and no more than its
// cgroup's CPU quota (a container's --cpus, a Kubernetes pod's CPU limit), cgroup v2 or v1, the tightest of
// its cgroup and their ancestors. Every machine-dependent default is derived from it at start-up (transform
// slots, libvips threads, the worker pool, libuv's pool, malloc arenas, nginx's workers), so one box of 2
// cores and one of 64, or a pod limited to 4 of them, each get their own.
//   node lib/src/cores.js   prints it (origin/bin/origin reads it before Node starts the origin)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** A file's text, or null. @param {string} file */
function read(file) {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    return null;
  }
}

/** `dir` and each of its ancestors under `mount`, deepest first. @param {string} mount @param {string} dir */
function upTo(mount, dir) {
  const dirs = [];
  for (let at = dir; ; at = path.posix.dirname(at)) {
    dirs.push(path.join(mount, at));
    if (at === '/' || at === '.') break;
  }
  return dirs;
}

/**
 * The CPU quota in cores (fractional) of the cgroups this process is in, or null where none limits it.
 * @param {{ cgroupFile?: string, sysfs?: string }} [where] /proc/self/cgroup and the cgroup mounts (tests)
 */
export function cgroupCpuLimit({ cgroupFile = '/proc/self/cgroup', sysfs = '/sys/fs/cgroup' } = {}) {
  const limits = [];
  for (const line of (read(cgroupFile) ?? '').split('\n')) {
    const [, controllers, dir] = line.split(':');
    if (dir === undefined) continue;
    if (controllers === '') {
      // v2: cpu.max is "max 100000" (no limit) or "<quota> <period>"; a hybrid host mounts it at unified/
      for (const mount of [sysfs, path.join(sysfs, 'unified')])
        for (const at of upTo(mount, dir)) {
          const [quota, period] = (read(path.join(at, 'cpu.max')) ?? '').split(' ').map(Number);
          if (quota > 0 && period > 0) limits.push(quota / period);
        }
    } else if (controllers.split(',').includes('cpu')) {
      // v1: cpu.cfs_quota_us is -1 where there is no limit
      for (const mount of [path.join(sysfs, 'cpu'), path.join(sysfs, 'cpu,cpuacct'), path.join(sysfs, controllers)])
        for (const at of upTo(mount, dir)) {
          const quota = Number(read(path.join(at, 'cpu.cfs_quota_us')));
          const period = Number(read(path.join(at, 'cpu.cfs_period_us')));
          if (quota > 0 && period > 0) limits.push(quota / period);
        }
    }
  }
  return limits.length ? Math.min(...limits) : null;
}

/**
 * The cores this process may use: its affinity's, within its cgroup's quota (rounded up: 1.5 cores of quota
 * keep two threads busy part of the time), at least one. @param {{ affinity?: number, quota?: number | null }} [given]
 */
export function usableCores({ affinity = os.availableParallelism(), quota = cgroupCpuLimit() } = {}) {
  return Math.max(1, Math.min(affinity, quota ? Math.ceil(quota - 1e-9) : Infinity));
}

if (import.meta.main) process.stdout.write(`${usableCores()}\n`);

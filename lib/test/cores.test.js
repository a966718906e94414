// The cores a process may use (lib/src/cores.js): its affinity within its cgroup's CPU quota, v1, v2 and a
// hybrid host, the tightest of nested cgroups; and the origin's defaults derived from it (#47).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { cgroupCpuLimit, usableCores } from '../src/cores.js';
import {
  backgroundEncodes,
  degradeDepth,
  transformQueueMax,
  transformSlots,
  transformWorkers,
  warmConcurrency,
  warmQueueMax,
  warmTransforms,
} from '../src/rules.js';

/** A fake /proc/self/cgroup and cgroup mounts: `files` relative to the mounts' root. @param {string} self @param {Record<string, string>} files */
function fakeCgroups(self, files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cgroups-'));
  fs.writeFileSync(path.join(dir, 'self'), self);
  for (const [file, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, 'fs', file)), { recursive: true });
    fs.writeFileSync(path.join(dir, 'fs', file), text);
  }
  const limit = cgroupCpuLimit({ cgroupFile: path.join(dir, 'self'), sysfs: path.join(dir, 'fs') });
  fs.rmSync(dir, { recursive: true, force: true });
  return limit;
}

test('a cgroup v2 quota (a container, a pod), the tightest of the cgroup and its ancestors', () => {
  assert.equal(fakeCgroups('0::/pod/app\n', { 'pod/app/cpu.max': '150000 100000', 'pod/cpu.max': 'max 100000' }), 1.5);
  assert.equal(fakeCgroups('0::/pod/app\n', { 'pod/app/cpu.max': 'max 100000', 'pod/cpu.max': '400000 100000' }), 4);
  assert.equal(fakeCgroups('0::/\n', { 'cpu.max': 'max 100000' }), null, 'no limit');
  // a hybrid host mounts v2 under unified/
  assert.equal(fakeCgroups('0::/ctr\n', { 'unified/ctr/cpu.max': '200000 100000' }), 2);
});

test('a cgroup v1 quota (cpu or cpu,cpuacct), -1 for none', () => {
  const self = '12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/\n';
  assert.equal(
    fakeCgroups(self, { 'cpu/docker/abc/cpu.cfs_quota_us': '300000', 'cpu/docker/abc/cpu.cfs_period_us': '100000' }),
    3,
  );
  assert.equal(
    fakeCgroups(self, {
      'cpu,cpuacct/docker/abc/cpu.cfs_quota_us': '-1',
      'cpu,cpuacct/docker/abc/cpu.cfs_period_us': '100000',
    }),
    null,
  );
  // inside the container's own cgroup namespace the path is / and the mount is its cgroup
  assert.equal(fakeCgroups('3:cpu:/\n', { 'cpu/cpu.cfs_quota_us': '50000', 'cpu/cpu.cfs_period_us': '100000' }), 0.5);
});

test('cores: the affinity within the quota, rounded up, at least one; the transform slots twice that, the workers one a core, the later AVIFs half', () => {
  assert.equal(usableCores({ affinity: 16, quota: null }), 16);
  assert.equal(usableCores({ affinity: 16, quota: 4 }), 4);
  assert.equal(usableCores({ affinity: 16, quota: 1.5 }), 2);
  assert.equal(usableCores({ affinity: 2, quota: 8 }), 2);
  assert.equal(usableCores({ affinity: 4, quota: 0.25 }), 1);
  assert.equal(transformSlots({ TRANSFORM_CONCURRENCY: 0 }), usableCores() * 2);
  assert.equal(transformSlots({ TRANSFORM_CONCURRENCY: 5 }), 5);
  assert.equal(transformWorkers({ TRANSFORM_WORKERS: 0 }), usableCores());
  assert.equal(transformWorkers({ TRANSFORM_WORKERS: 3 }), 3);
  const derived = (/** @type {number} */ cores) => backgroundEncodes({ BACKGROUND_ENCODES: 0 }, cores);
  assert.deepEqual([1, 2, 3, 4, 16, 64].map(derived), [1, 1, 1, 2, 8, 32], 'later AVIFs: half the cores, at least one');
  assert.equal(backgroundEncodes({ BACKGROUND_ENCODES: 0 }), derived(usableCores()));
  assert.equal(backgroundEncodes({ BACKGROUND_ENCODES: 4 }, 16), 4);
});

test('the warm lane: a quarter of the cores, at least one; the warmer asks two images for each, of every origin', () => {
  const lane = (/** @type {number} */ cores) => warmTransforms({ WARM_TRANSFORMS: 0 }, cores);
  assert.deepEqual([1, 2, 3, 4, 8, 16, 64].map(lane), [1, 1, 1, 1, 2, 4, 16]);
  assert.equal(warmTransforms({ WARM_TRANSFORMS: 0 }), lane(usableCores()));
  assert.equal(warmTransforms({ WARM_TRANSFORMS: 3 }, 16), 3);
  const asked = (/** @type {number} */ cores, origins = 1) => warmConcurrency({ WARM_CONCURRENCY: 0 }, cores, origins);
  assert.deepEqual(
    [1, 2, 8, 16, 64].map((cores) => asked(cores)),
    [2, 2, 4, 8, 32],
  );
  assert.equal(asked(16, 3), 24, 'three origins of 16 cores');
  assert.equal(warmConcurrency({ WARM_CONCURRENCY: 0, WARM_TRANSFORMS: 2 }, 2), 4, 'the origins told their lane');
  assert.equal(warmConcurrency({ WARM_CONCURRENCY: 5 }, 16, 3), 5);
  const waiting = (/** @type {number} */ cores) => warmQueueMax({ WARM_QUEUE_MAX: 0 }, cores);
  assert.deepEqual([2, 16, 32, 64].map(waiting), [8, 8, 16, 32], 'room for what the warmer sends past the lane');
  assert.equal(warmQueueMax({ WARM_QUEUE_MAX: 3 }, 64), 3);
});

test('this process: taskset -c 0 gives one core', { skip: process.platform !== 'linux' }, () => {
  const script = path.join(import.meta.dirname, '..', 'src', 'cores.js');
  assert.equal(execFileSync('taskset', ['-c', '0', process.execPath, script], { encoding: 'utf8' }).trim(), '1');
  assert.equal(execFileSync(process.execPath, [script], { encoding: 'utf8' }).trim(), String(usableCores()));
});

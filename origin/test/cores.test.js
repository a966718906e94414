// The origin's machine-dependent defaults come from the cores it may use (#47): started on one core
// (taskset -c 0) it has two transform slots, sixteen waiting for each, and serves; on a 16-core affinity mask,
// where the machine has them, thirty-two.
import assert from 'node:assert/strict';
import os from 'node:os';
import { test } from 'node:test';
import sharp from 'sharp';
import { decode } from '../../test/support/images.js';
import { metricValue } from '../../test/support/metrics.js';
import { startOrigin } from './harness.js';

/** An origin started through `taskset -c cpus`: its slots, and a variant it makes. @param {string} cpus */
async function onCpus(cpus) {
  const origin = await startOrigin({}, { through: ['taskset', '-c', cpus] });
  try {
    const url = origin.site.add(
      'cores.jpg',
      await sharp({ create: { width: 400, height: 300, channels: 3, background: '#345' } })
        .jpeg()
        .toBuffer(),
    );
    const response = await fetch(origin.proxied(url, { width: 120 }));
    assert.equal(response.status, 200);
    assert.equal((await decode(Buffer.from(await response.arrayBuffer()))).width, 120);
    return [
      await metricValue(origin.metricsUrl, 'origin_transform_concurrency'),
      await metricValue(origin.metricsUrl, 'origin_queue_max'),
    ];
  } finally {
    await origin.stop();
  }
}

test(
  'on one core (taskset -c 0): two transform slots, 32 may wait, and it serves',
  { skip: process.platform !== 'linux' },
  async () => {
    assert.deepEqual(await onCpus('0'), [2, 32]);
  },
);

test(
  'on a 16-core affinity mask: thirty-two slots, 512 may wait',
  { skip: os.availableParallelism() < 16 ? 'fewer than 16 cores here' : process.platform !== 'linux' },
  async () => {
    assert.deepEqual(await onCpus('0-15'), [32, 512]);
  },
);

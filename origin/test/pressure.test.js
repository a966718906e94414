// The CPU pressure gate's reading of Linux PSI (origin/src/pressure.js).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { stalledMicros, watchCpuPressure } from '../src/pressure.js';

test('the stalled share of each interval is read from PSI\'s "some" total; no PSI file reads 0', async () => {
  assert.equal(
    stalledMicros(
      'some avg10=1.63 avg60=4.76 avg300=25.28 total=3267651981\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n',
    ),
    3267651981,
  );
  assert.equal(stalledMicros('nonsense'), null);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'psi-'));
  try {
    const file = path.join(dir, 'cpu');
    fs.writeFileSync(file, 'some avg10=0 avg60=0 avg300=0 total=1000000\n');
    // stalled half of the time: the test's clock and the file's total move together, in one step, so any
    // interval the watch reads, however late its timer fires on a busy machine, saw exactly half stalled
    let clock = 0;
    const watch = watchCpuPressure({ file, intervalMs: 20, now: () => clock });
    const waited = performance.now();
    while (watch.share() === 0 && performance.now() - waited < 30_000) {
      clock += 7;
      fs.writeFileSync(file, `some avg10=0 avg60=0 avg300=0 total=${1_000_000 + clock * 500}\n`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    watch.stop();
    assert.equal(watch.share(), 0.5);
    const none = watchCpuPressure({ file: path.join(dir, 'missing') });
    assert.equal(none.share(), 0);
    none.stop();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

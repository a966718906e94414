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
    const watch = watchCpuPressure({ file, intervalMs: 100 });
    // stalled half of the time: the total grows by half the microseconds elapsed, written often (whenever a
    // busy machine runs this), so every interval the watch reads, however late, saw half of it stalled
    const start = performance.now();
    const write = () =>
      fs.writeFileSync(
        file,
        `some avg10=0 avg60=0 avg300=0 total=${1_000_000 + Math.round((performance.now() - start) * 500)}\n`,
      );
    while (performance.now() - start < 450) {
      write();
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    watch.stop();
    assert.ok(watch.share() > 0.2 && watch.share() < 0.8, `a share near a half: ${watch.share()}`);
    const none = watchCpuPressure({ file: path.join(dir, 'missing') });
    assert.equal(none.share(), 0);
    none.stop();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

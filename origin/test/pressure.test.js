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
    // half of each 100 ms stalled: 50,000 µs more per interval
    for (let i = 1; i <= 4; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      fs.writeFileSync(file, `some avg10=0 avg60=0 avg300=0 total=${1_000_000 + i * 50_000}\n`);
    }
    await new Promise((resolve) => setTimeout(resolve, 120));
    watch.stop();
    assert.ok(watch.share() > 0.2 && watch.share() < 0.8, `a share near a half: ${watch.share()}`);
    const none = watchCpuPressure({ file: path.join(dir, 'missing') });
    assert.equal(none.share(), 0);
    none.stop();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

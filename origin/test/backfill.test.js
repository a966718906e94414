// The backfill command (#36) over 500 keys (400 an upstream holds, 50 it lacks, 50 whose bytes it has wrong)
// through a real origin: cut short with SIGKILL and run again, every key is accounted for once, the store
// holds exactly the 400, and a third run asks nothing of anyone.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import { startUpstreamHost } from '../../test/support/upstream-host.js';
import { root } from '../../test/support/processes.js';
import { waitFor } from '../../test/support/ports.js';
import { keysOf } from '../src/cli/backfill.js';
import { keyOf } from '../src/keys.js';
import { startOrigin } from './harness.js';

/** A tiny distinct PNG. @param {number} seed */
const png = (seed) =>
  sharp({
    create: { width: 8, height: 8, channels: 3, background: { r: seed % 256, g: Math.floor(seed / 256), b: 7 } },
  })
    .png()
    .toBuffer();

/** @type {Awaited<ReturnType<typeof startUpstreamHost>>} */
let upstream;
/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let origin;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'backfill-'));

before(async () => {
  upstream = await startUpstreamHost('honest');
  origin = await startOrigin({ UPSTREAM_IMAGE_HOSTS: upstream.base, UPSTREAM_MISSING_TTL_S: '0' });
});

after(async () => {
  await origin?.stop();
  await upstream?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs the command; `onStart` may kill it. @param {string} file @param {(child: import('node:child_process').ChildProcess) => Promise<void>} [onStart] */
function runBackfill(file, onStart) {
  const child = spawn(
    process.execPath,
    [path.join(root, 'origin/src/cli/backfill.js'), file, '--origin', origin.base, '--concurrency', '4'],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  onStart?.(child);
  return exited.then((/** @type {any} */ exit) => ({
    ...exit,
    stderr,
    result: stdout.trim() ? JSON.parse(stdout.trim()) : null,
  }));
}

test('keysOf: bare keys and URLs, each once; comments skipped; the rest refused', () => {
  const key = 'DQmZi174Xz96UrRVBMNRHb6A2FfU3z1HRPwPPQCgSMgdiUT';
  const { keys, refused } = keysOf(
    `# from the old host's log\n${key}\nhttps://images.hive.blog/${key}/photo.jpg\n\nhttps://images.hive.blog/p/abc\nnot a key!\n`,
  );
  assert.deepEqual(keys, [key]);
  assert.deepEqual(refused, ['https://images.hive.blog/p/abc', 'not a key!']);
});

test('500 keys, interrupted and resumed: counts add up, and a second full run fetches nothing', async () => {
  const lines = [];
  const expected = { stored: 0, missing: 0, mismatched: 0 };
  for (let i = 0; i < 500; i += 1) {
    const body = await png(i);
    const key = keyOf(body);
    if (i % 10 === 3) expected.missing += 1;
    else if (i % 10 === 7) {
      upstream.hold(key, await png(i + 1000)); // the wrong bytes for this key
      expected.mismatched += 1;
    } else {
      upstream.hold(key, body);
      expected.stored += 1;
    }
    lines.push(i % 2 ? key : `${upstream.base}/${key}/image.png`);
  }
  const file = path.join(dir, 'keys.txt');
  fs.writeFileSync(file, `${lines.join('\n')}\n`);

  const cut = await runBackfill(file, async (child) => {
    await waitFor(
      async () =>
        fs.existsSync(`${file}.progress`) &&
        fs.readFileSync(`${file}.progress`, 'utf8').trim().split('\n').length >= 100,
      60_000,
      '100 keys done',
    );
    child.kill('SIGKILL');
  });
  assert.equal(cut.signal, 'SIGKILL');
  const doneFirst = fs.readFileSync(`${file}.progress`, 'utf8').trim().split('\n').length;
  assert.ok(doneFirst >= 100 && doneFirst < 500, `${doneFirst} done when cut`);

  const resumed = await runBackfill(file);
  assert.equal(resumed.code, 0, resumed.stderr);
  const second = resumed.result;
  assert.equal(second.total, 500);
  assert.equal(second.doneBefore, doneFirst, 'what the first run finished was not asked again');
  assert.equal(second.failed, 0);
  assert.equal(
    second.doneBefore + second.stored + second.present + second.mismatched + second.missing,
    500,
    JSON.stringify(second),
  );

  // over both runs, by the progress file: every key once with its true outcome (a key stored just before
  // the kill, but not written down, is "present" on the second run)
  const outcomes = new Map(
    fs
      .readFileSync(`${file}.progress`, 'utf8')
      .trim()
      .split('\n')
      .map((line) => /** @type {[string, string]} */ (line.split('\t'))),
  );
  assert.equal(outcomes.size, 500);
  const tally = (/** @type {string[]} */ names) =>
    [...outcomes.values()].filter((outcome) => names.includes(outcome)).length;
  assert.equal(tally(['stored', 'present']), expected.stored);
  assert.equal(tally(['missing']), expected.missing);
  assert.equal(tally(['mismatched']), expected.mismatched);
  const stored = fs
    .readdirSync(path.join(origin.dataDir, 'uploads'), { recursive: true })
    .map(String)
    .filter((name) => /[1-9A-HJ-NP-Za-km-z]{40,}$/.test(name));
  assert.equal(stored.length, expected.stored, 'exactly the keys whose bytes were right are stored');

  const hits = upstream.hits();
  const again = await runBackfill(file);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(again.result.doneBefore, 500);
  assert.equal(upstream.hits(), hits, 'the upstream was asked nothing');
});

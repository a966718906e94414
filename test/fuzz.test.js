// The fuzz tier (#51): a seeded, bounded campaign of mutated real files of every input format through one
// origin's real endpoints (bench/fuzz.js; kept pixels on, each upload asked in several variants at once and
// as the warmer asks), and every file that once failed (test/fuzz-corpus/) replayed: each
// answer the image or a 4xx JSON error, no 5xx, no restart.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { FORMATS, FUZZ_ORIGIN, corpusCases, fuzzCases, keepFailures, runFuzz } from '../bench/fuzz.js';
import { startOrigin } from '../origin/test/harness.js';
import { metricValue } from './support/metrics.js';

/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let origin;
before(async () => {
  origin = await startOrigin(FUZZ_ORIGIN);
});
after(() => origin?.stop());

test('fuzz: mutated JPEG, PNG, WebP, GIF, TIFF, AVIF, HEIC and animated GIF and WebP files through /p/ and /upload: no 5xx, no restart', async (t) => {
  const pid = origin.pid();
  const cases = [...(await fuzzCases(24, 20261126)), ...corpusCases()];
  const result = await runFuzz(origin, { cases });
  t.diagnostic(
    `${result.cases} cases (${FORMATS.length} formats), ${result.requests} requests, statuses ${JSON.stringify(result.statuses)}, problems ${result.problems.length}`,
  );
  keepFailures(result.problems);
  if (result.problems.length) t.diagnostic(`the origin's log:\n${origin.output().slice(-6000)}`);
  assert.deepEqual(
    result.problems.map(({ name, problem }) => `${name}: ${problem}`),
    [],
    'kept in test/fuzz-corpus/',
  );
  assert.ok(result.statuses['200'] > 0 && result.statuses['400'] > 0, 'the mutations reach images and refusals');
  // the campaign reaches the kept-pixels paths: variants made from pixels kept for another, and the warmer's
  const kept = await metricValue(origin.metricsUrl, 'origin_kept_pixels_total', { result: 'hit' });
  assert.ok(kept > 0, `variants made from kept pixels: ${kept}`);
  const warm = await metricValue(origin.metricsUrl, 'origin_warm_requests_total', { result: 'made' });
  assert.ok(warm > 0, `warm variants made: ${warm}`);
  assert.equal(origin.pid(), pid, 'the same origin process answered every case');
  assert.equal((await fetch(`${origin.base}/healthz`)).status, 200);
});

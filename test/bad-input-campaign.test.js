import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startCampaign } from '../bench/bad-input.js';

/** @type {Awaited<ReturnType<typeof startCampaign>>} */
let campaign;

before(async () => {
  campaign = await startCampaign();
});
after(() => campaign?.stop());

test('bad input everywhere: a 4xx JSON error or a correct image, never a 5xx, a crash or a forbidden request', async () => {
  const pidBefore = await campaign.stack.servicePid('origin');
  const classes = await campaign.run();
  const rows = Object.entries(classes).map(
    ([name, entry]) =>
      `${name}: ${entry.cases} cases, ${entry.images} images, ${entry.errors4xx} 4xx JSON, ${entry.problems.length} problems`,
  );
  process.stdout.write(`# bad-input campaign\n${rows.map((row) => `#   ${row}`).join('\n')}\n`);
  assert.deepEqual(
    Object.values(classes).flatMap((entry) => entry.problems),
    [],
  );
  assert.ok(Object.values(classes).reduce((sum, entry) => sum + entry.cases, 0) > 250);
  assert.equal(campaign.canary.hits(), 0, 'no request reached a forbidden address');
  assert.ok(pidBefore > 0);
  assert.equal(await campaign.stack.servicePid('origin'), pidBefore, 'the origin never crashed (same process)');
  const stdout = await campaign.stack.statusText();
  assert.ok(
    String(stdout)
      .split('\n')
      .filter(Boolean)
      .every((line) => /RUNNING/.test(line)),
    stdout,
  );
});

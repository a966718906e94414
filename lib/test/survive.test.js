// The last line of defence (#51): an uncaught error raised inside the HTTP client's code (what a peer made it
// throw) is logged and counted and the process goes on; any other uncaught error still ends it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

/** Runs a script that arms the defence and throws `stackLine`'s error from a timer. @param {string} stackLine */
function throwFrom(stackLine) {
  const script = `
    import { survivePeerFaults } from '@stack/lib/src/service.js';
    import { createLogger } from '@stack/lib/src/log.js';
    import { createRegistry } from '@stack/lib/src/metrics.js';
    const registry = createRegistry('probe');
    survivePeerFaults('probe', createLogger('probe', 'fatal'), registry);
    setTimeout(() => {
      const err = new Error('assert(!this.paused)');
      err.stack = 'AssertionError: assert(!this.paused)\\n    at ${stackLine}';
      throw err;
    }, 10);
    setTimeout(async () => {
      console.log((await registry.metrics()).match(/^probe_survived_errors_total\\{[^}]*\\} (\\d+)$/m)?.[1]);
      process.exit(0);
    }, 300);
  `;
  return spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', cwd: process.cwd() });
}

test("an error thrown inside undici's code is survived and counted", () => {
  const result = throwFrom('Parser.finish (/app/node_modules/undici/lib/dispatcher/client-h1.js:375:5)');
  assert.equal(result.status, 0, result.stderr);
  assert.equal(result.stdout.trim(), '1');
});

test('any other uncaught error still ends the process', () => {
  const result = throwFrom('handler (/app/origin/src/images.js:10:5)');
  assert.equal(result.status, 1, result.stdout + result.stderr);
});

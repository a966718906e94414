// needs the whole-stack tier's built tools (Podman); runs beside the other files (its machines are containers)
// The fresh-machine stage (./infra/stack fresh): the commit under test cloned and brought up as a newcomer
// would, in pristine Debian 12 containers (test/fresh/machine.sh), so a warm machine cannot hide what a fresh
// one lacks (#42: a run root made 0700 passed every check on a machine where it already existed).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { ROOT } from '../infra/resolve.js';

/**
 * ./infra/stack fresh MODE, its output kept: both modes start at once (their machines are containers of
 * their own, each with its own network), so the user's waits less than the root's whole stage.
 * @param {string} mode @returns {Promise<{ status: number | null, output: string }>}
 */
function start(mode) {
  const child = spawn(`${ROOT}/infra/stack`, ['fresh', mode], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr.on('data', (chunk) => {
    output += chunk;
  });
  return new Promise((resolve) => child.on('exit', (status) => resolve({ status, output })));
}
const stages = { root: start('root'), user: start('user') };

/** The stage of MODE ended: its step times reported. @param {import('node:test').TestContext} t @param {'root' | 'user'} mode */
async function stage(t, mode) {
  const { status, output } = await stages[mode];
  for (const line of output.split('\n').filter((text) => text.startsWith('step: '))) t.diagnostic(line.slice(6));
  // the run's unit tier is its test --quick: its counts said here, where the run's output shows them
  const counts = [...output.matchAll(/^ℹ (tests|pass|fail|skipped) (\d+)$/gm)].map(
    (match) => `${match[1]} ${match[2]}`,
  );
  if (counts.length) t.diagnostic(`the unit tier (test --quick): ${counts.join(', ')}`);
  assert.equal(status, 0, `the fresh-machine stage (${mode}) failed:\n${failureOf(output)}`);
}

/**
 * What a failed stage says first: its steps and failures (a failed test's summary inside it), then the end of
 * its output (the stack's logs, which alone would fill the message). @param {string} output
 */
function failureOf(output) {
  const summary = output.indexOf('✖ failing tests:');
  const marks = output
    .split('\n')
    .filter((line) => /^(── |FAIL: |✖ )/.test(line))
    .slice(0, 80)
    .join('\n');
  const failing = summary >= 0 ? output.slice(summary, summary + 6000) : '';
  // the failed step's own output (a check or an install that failed before any test), before the stack's logs
  const logs = output.indexOf('\n── end of ');
  const before = logs >= 0 ? output.slice(0, logs) : output;
  const failedStep = before.slice(before.lastIndexOf('\n── ') + 1).slice(-6000);
  return `${marks}\n${failing}\n… the failed step's output:\n${failedStep}\n… the end of its output:\n${output.slice(-3000)}`;
}

test(
  'fresh machine, as root: clones in a 0700 directory, a path with a space and /opt come up and serve',
  { timeout: 2_400_000 },
  (t) => stage(t, 'root'),
);

test('fresh machine, as a user: up names the apt-get line, then works once root ran it', { timeout: 1_800_000 }, (t) =>
  stage(t, 'user'),
);

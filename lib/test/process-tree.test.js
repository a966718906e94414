import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import { alive, childPids, newest, processTree } from '../src/process-tree.js';

test('a process tree lists children and their children, and a gone process has none', async () => {
  // a shell that starts a sleep and waits on it: this process, the shell, the sleep
  const shell = spawn('sh', ['-c', 'sleep 30 & echo $!; wait'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const [line] = await once(shell.stdout, 'data');
  const sleep = Number(String(line).trim());
  try {
    assert.ok(childPids(process.pid).includes(/** @type {number} */ (shell.pid)));
    assert.deepEqual(childPids(/** @type {number} */ (shell.pid)), [sleep]);
    const tree = processTree(process.pid);
    assert.equal(tree[0], process.pid);
    assert.ok(tree.includes(/** @type {number} */ (shell.pid)) && tree.includes(sleep), `${tree}`);
  } finally {
    process.kill(sleep);
    await once(shell, 'exit');
  }
  assert.deepEqual(childPids(/** @type {number} */ (shell.pid)), []);
  assert.deepEqual(processTree(/** @type {number} */ (shell.pid)), [shell.pid]);
});

test('newest: the process started last of several; alive: a running process and not a gone one', async () => {
  const first = spawn('sleep', ['30']);
  await new Promise((resolve) => setTimeout(resolve, 50));
  const second = spawn('sleep', ['30']);
  const [a, b] = [/** @type {number} */ (first.pid), /** @type {number} */ (second.pid)];
  try {
    assert.equal(newest([b, a]), b);
    assert.equal(newest([a, b]), b);
    assert.ok(alive(a) && alive(process.pid));
  } finally {
    second.kill();
    await once(second, 'exit');
  }
  assert.equal(newest([a, b]), a, 'one gone is left out');
  assert.ok(!alive(b));
  first.kill();
  await once(first, 'exit');
  assert.equal(newest([a, b]), undefined);
});

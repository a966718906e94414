// test/support/ports.js: the test files run at once, each a process; a port one of them was given is never
// given to another while it lives (a service of one file's was once started on a port another file's took).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import { freePort } from './support/ports.js';

test("freePort never gives a port another live test process was given; a gone process's ports are given again", async () => {
  const other = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import { freePort } from './test/support/ports.js';
       const ports = [];
       for (let i = 0; i < 300; i += 1) ports.push(await freePort());
       process.stdout.write(JSON.stringify(ports) + '\\n');
       setInterval(() => {}, 1000);`,
    ],
    { cwd: new URL('..', import.meta.url), stdio: ['ignore', 'pipe', 'inherit'] },
  );
  /** @type {Set<number>} */
  let theirs = new Set();
  try {
    let output = '';
    while (!output.endsWith('\n')) output += String((await once(other.stdout, 'data'))[0]);
    theirs = new Set(JSON.parse(output));
    const mine = [];
    // a quarter of the range: about 75 of theirs would come up again if nothing kept them apart
    for (let i = 0; i < 3000; i += 1) mine.push(await freePort());
    assert.deepEqual(
      mine.filter((port) => theirs.has(port)),
      [],
    );
  } finally {
    other.kill();
    await once(other, 'exit');
  }
  // gone: about a hundred of its ports come up in as many picks again
  const again = [];
  for (let i = 0; i < 3000; i += 1) again.push(await freePort());
  assert.ok(
    again.some((port) => theirs.has(port)),
    'no port of the process gone was given again',
  );
});

// The app copy (infra/users.js appRoot): where the stack's users run the programs from when the checkout is
// private to root. Stacks of one checkout rendered at once (a test tier's beside `up`'s) made it at once and
// one's rename failed (ENOTEMPTY), or removed the copy another's programs ran from; two made the shared
// directory at once (EEXIST), or one's look at the copy's stamp failed as another put a new copy in place. Run
// for real: a private clone of this checkout, several processes asking for its copy together.
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { ROOT, sharedDirOf } from '../resolve.js';

const run = promisify(execFile);

/** A private (0700) clone of this checkout that can load infra/users.js. @param {import('node:test').TestContext} t */
function privateClone(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'app-copy-'));
  const clone = path.join(dir, 'checkout');
  execFileSync('git', ['clone', '-q', ROOT, clone]);
  // the code under test as this checkout has it, committed or not
  for (const file of ['infra/users.js', 'infra/resolve.js', 'infra/dirs.js'])
    fs.copyFileSync(path.join(ROOT, file), path.join(clone, file));
  // infra/users.js needs bcryptjs (render/prometheus.js): node_modules of its own, with a cache dir
  fs.mkdirSync(path.join(clone, 'node_modules/.cache'), { recursive: true });
  fs.symlinkSync(path.join(ROOT, 'node_modules/bcryptjs'), path.join(clone, 'node_modules/bcryptjs'));
  // where appRoot copies it
  const shared = sharedDirOf(clone);
  t.after(() => {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(shared, { recursive: true, force: true });
  });
  /** appRoot of the clone, in a process of its own, as a render does. */
  const appRoot = async () =>
    (
      await run(process.execPath, [
        '--input-type=module',
        '-e',
        'const { appRoot } = await import(process.argv[1]); process.stdout.write(appRoot({}))',
        path.join(clone, 'infra/users.js'),
      ])
    ).stdout;
  return { clone, shared, appRoot };
}

test('stacks of one private checkout rendered at once: one copy made, none fails, none removes another', async (t) => {
  if (process.getuid?.() !== 0) return t.skip('the app copy is made when root renders a private checkout');
  const { clone, shared, appRoot } = privateClone(t);
  const target = path.join(shared, 'app');
  // all at once: each makes the shared directory, finds no copy, waits for the lock
  const answers = await Promise.all(Array.from({ length: 10 }, appRoot));
  assert.deepEqual(new Set(answers), new Set([target]));
  assert.ok(fs.existsSync(path.join(target, 'infra/users.js')), 'the checkout is in the copy');
  const stamped = fs.statSync(path.join(target, '.copied')).mtimeMs;
  assert.deepEqual(
    fs.readdirSync(shared).filter((entry) => entry.startsWith('app.') && entry !== 'app.lock'),
    [],
    'no half-made copy left',
  );
  // a tool's cache written into the checkout (the origin tests' compile cache) is not a change of the app
  fs.writeFileSync(path.join(clone, 'node_modules/.cache/written-by-a-test'), 'x');
  assert.equal(await appRoot(), target);
  assert.equal(fs.statSync(path.join(target, '.copied')).mtimeMs, stamped, 'not copied again');
  assert.ok(!fs.existsSync(path.join(target, 'node_modules/.cache')), 'tools caches are not copied');
  // a file of the checkout changed: copied again, once, by whichever of them comes first; the others come
  // one after another, some while the new copy replaces the old (its stamp gone as they look at it)
  await new Promise((resolve) => setTimeout(resolve, 20));
  fs.appendFileSync(path.join(clone, 'README.md'), '\nchanged\n');
  const again = await Promise.all(
    Array.from({ length: 10 }, (_, i) => new Promise((resolve) => setTimeout(resolve, i * 15)).then(appRoot)),
  );
  assert.deepEqual(new Set(again), new Set([target]));
  assert.match(fs.readFileSync(path.join(target, 'README.md'), 'utf8'), /\nchanged\n$/);
  assert.ok(fs.statSync(path.join(target, '.copied')).mtimeMs > stamped, 'copied again');
});

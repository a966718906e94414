// The app copy (infra/app-copy.js appRoot): where the stack's users run the programs from when the checkout is
// private to root. Stacks of one checkout rendered at once (a test tier's beside `up`'s) made it at once and
// one's rename failed (ENOTEMPTY), or removed the copy another's programs ran from; two made the shared
// directory at once (EEXIST), or one's look at the copy's stamp failed as another put a new copy in place. Run
// for real: a private clone of this checkout, several processes asking for its copy together.
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { ROOT, sharedDirOf } from '../resolve.js';

const run = promisify(execFile);

/** A private (0700) clone of this checkout that can load infra/app-copy.js. @param {import('node:test').TestContext} t */
function privateClone(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'app-copy-'));
  const clone = path.join(dir, 'checkout');
  execFileSync('git', ['clone', '-q', ROOT, clone]);
  // the code under test as this checkout has it, committed or not
  for (const file of ['infra/app-copy.js', 'infra/resolve.js', 'infra/dirs.js'])
    fs.copyFileSync(path.join(ROOT, file), path.join(clone, file));
  // a tool's cache directory, as the tests' compile cache makes one
  fs.mkdirSync(path.join(clone, 'node_modules/.cache'), { recursive: true });
  // where appRoot copies it
  const shared = sharedDirOf(clone);
  // its copy first: a render meanwhile (another test's) finds no copy whose checkout is gone
  t.after(() => {
    fs.rmSync(shared, { recursive: true, force: true });
    fs.rmSync(dir, { recursive: true, force: true });
  });
  /** appRoot of the clone, in a process of its own, as a render does: what it printed, and said on stderr. */
  const render = () =>
    run(process.execPath, [
      '--input-type=module',
      '-e',
      'const { appRoot } = await import(process.argv[1]); process.stdout.write(appRoot({}))',
      path.join(clone, 'infra/app-copy.js'),
    ]);
  const appRoot = async () => (await render()).stdout;
  return { clone, shared, appRoot, render };
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

test('the app copy of a checkout that is gone is removed by the next render, unless a process uses it', async (t) => {
  if (process.getuid?.() !== 0) return t.skip('the app copy is made when root renders a private checkout');
  const [gone, used, kept] = [privateClone(t), privateClone(t), privateClone(t)];
  for (const clone of [gone, used, kept]) await clone.appRoot();
  // the rest of a checkout's directory is its run directory (logs, its stack's data): never removed
  fs.mkdirSync(path.join(gone.shared, 'data'));
  fs.writeFileSync(path.join(gone.shared, 'data', 'an-upload'), 'x');
  // a program still running from a copy whose checkout was removed under it
  const sleeper = spawn('sleep', ['60'], { cwd: path.join(used.shared, 'app'), stdio: 'ignore' });
  t.after(() => sleeper.kill('SIGKILL'));
  await once(sleeper, 'spawn');
  fs.rmSync(gone.clone, { recursive: true, force: true });
  fs.rmSync(used.clone, { recursive: true, force: true });

  const { stderr } = await kept.render();
  assert.ok(!fs.existsSync(path.join(gone.shared, 'app')), 'the copy of the checkout that is gone is removed');
  assert.match(stderr, new RegExp(`${gone.shared}/app removed: its checkout is gone`));
  assert.equal(fs.readFileSync(path.join(gone.shared, 'data', 'an-upload'), 'utf8'), 'x', 'its data is left');
  assert.ok(fs.existsSync(path.join(used.shared, 'app', 'infra/stack')), 'the copy a process runs in is kept');
  assert.ok(fs.existsSync(path.join(kept.shared, 'app', 'infra/stack')), 'the copy of a checkout still there is kept');

  sleeper.kill('SIGKILL');
  await once(sleeper, 'exit');
  await kept.render();
  assert.ok(!fs.existsSync(path.join(used.shared, 'app')), 'removed once no process uses it');
  assert.ok(fs.existsSync(path.join(kept.shared, 'app', 'infra/stack')));
});

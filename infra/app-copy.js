// Where the programs run from when the stack's users cannot read the checkout (a root-run clone in /root, a
// mktemp -d): a copy of it beside its run directory, /var/lib/image-cdn-stack/<checkout>-<hash>/app, made
// again whenever a file of the checkout is newer. A copy whose checkout is gone (a clone removed, as each CI
// run removes its own) is removed by the next render as root, unless a process still uses it; the rest of
// that directory (its run directory: logs, the data of its stack) is left to its operator.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { makeDir } from './dirs.js';
import { ROOT, SHARED_RUN_ROOT, reachableByOthers, sharedDirOf } from './resolve.js';

/** What the app copy leaves out: not the app, or tools' caches the tests write while stacks run from it. */
const NOT_COPIED = ['.git', '.run', 'bench/.peers', 'bench/reports', 'node_modules/.cache'];
/** The file beside an app copy that names its checkout: a copy whose checkout is gone is removed. */
const CHECKOUT_FILE = 'checkout';

/**
 * Whether a file of the checkout is newer than `stamp` (or there is no stamp). @param {string} stamp
 */
function newerThan(stamp) {
  if (!fs.existsSync(stamp)) return true;
  const prunes = NOT_COPIED.flatMap((dir) => ['-path', path.join(ROOT, dir), '-prune', '-o']);
  try {
    const found = execFileSync('find', [ROOT, ...prunes, '-newer', stamp, '-print', '-quit'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    return found.trim() !== '';
  } catch (err) {
    // find walks on past what it could not read (a file a test removed as it looked) and says so by its
    // status: what it found counts; the stamp gone while find read it means another render is putting a new
    // copy in place (look again under the lock)
    return String(/** @type {{ stdout?: string }} */ (err).stdout ?? '').trim() !== '' || !fs.existsSync(stamp);
  }
}

/**
 * Where the programs run from: this checkout, or when the stack user cannot read it (a root-run clone in
 * /root, a mktemp -d) a copy of it in /var/lib/image-cdn-stack, made again whenever a file of the checkout
 * is newer than the copy. One process at a time makes it (a lock on `app.lock` beside it), and looks again
 * once it holds the lock: the stacks of one checkout rendered together (a test tier's, `up`'s beside it)
 * make it once, and none removes the copy another has just made. Every render with stack users removes the
 * copies of checkouts that are gone first. @param {Record<string, unknown> | null} users
 */
export function appRoot(users) {
  if (users) removeOrphanCopies();
  if (!users || reachableByOthers(ROOT)) return ROOT;
  const target = path.join(sharedDirOf(ROOT), 'app');
  const stamp = path.join(target, '.copied');
  if (!newerThan(stamp)) return target;
  makeDir(path.dirname(target), 0o755);
  const lock = fs.openSync(`${target}.lock`, 'a', 0o600);
  try {
    // flock(1) locks the open file this process holds (fd 3 of its child): held until it is closed
    execFileSync('flock', ['--exclusive', '3'], { stdio: ['ignore', 'ignore', 'inherit', lock] });
    if (newerThan(stamp)) copyApp(target);
  } finally {
    fs.closeSync(lock);
  }
  return target;
}

/** The checkout copied to `target`, readable by all, stamped, in place of the copy before. @param {string} target */
function copyApp(target) {
  const fresh = `${target}.${process.pid}`;
  fs.rmSync(fresh, { recursive: true, force: true });
  makeDir(fresh, 0o755);
  const excludes = NOT_COPIED.map((dir) => `--exclude=./${dir}`).join(' ');
  execFileSync('sh', [
    '-c',
    `tar -C "$1" ${excludes} -cf - . | tar -C "$2" -xf - && chmod -R a+rX "$2"`,
    'copy',
    ROOT,
    fresh,
  ]);
  fs.writeFileSync(path.join(fresh, '.copied'), '');
  fs.writeFileSync(path.join(path.dirname(target), CHECKOUT_FILE), `${ROOT}\n`);
  // the copy before moved aside, not removed in place: the target is missing between two renames only
  const old = `${target}.old.${process.pid}`;
  fs.rmSync(old, { recursive: true, force: true });
  if (fs.existsSync(target)) fs.renameSync(target, old);
  fs.renameSync(fresh, target);
  fs.rmSync(old, { recursive: true, force: true });
}

/** A path of the checkout as the programs see it: in the app copy when there is one. @param {string} app @param {string} file */
export function inApp(app, file) {
  return file.startsWith(`${ROOT}/`) ? path.join(app, path.relative(ROOT, file)) : file;
}

/**
 * The app copies (with their half-made and set-aside twins) of the checkouts that are gone, removed, each
 * under its lock, unless a process runs from it or names it; the shared directories they sit in stay, with
 * whatever else is there. A directory whose copy names no checkout (made before copies did) is left alone.
 */
function removeOrphanCopies() {
  const own = sharedDirOf(ROOT);
  const orphans = sharedDirs().filter((dir) => dir !== own && checkoutGone(dir));
  if (!orphans.length) return;
  const used = pathsInUse();
  for (const dir of orphans) {
    if (used.some((named) => named === dir || named.startsWith(`${dir}/`))) continue;
    removeCopy(dir);
  }
}

/** The checkouts' directories under the shared run root that hold an app copy. */
function sharedDirs() {
  try {
    return fs
      .readdirSync(SHARED_RUN_ROOT, { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && fs.existsSync(path.join(SHARED_RUN_ROOT, entry.name, 'app')))
      .map((entry) => path.join(SHARED_RUN_ROOT, entry.name));
  } catch {
    return [];
  }
}

/** Whether the checkout an app copy was made from is no longer there. @param {string} dir */
function checkoutGone(dir) {
  let checkout = '';
  try {
    checkout = fs.readFileSync(path.join(dir, CHECKOUT_FILE), 'utf8').trim();
  } catch {
    return false; // made before copies named their checkout: not known, left
  }
  return checkout !== '' && !fs.existsSync(path.join(checkout, 'infra', 'stack'));
}

/** Every path a process runs from (its executable, its working directory) or names on its command line. */
function pathsInUse() {
  /** @type {string[]} */
  const named = [];
  for (const pid of fs.readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    const at = path.join('/proc', pid);
    for (const link of ['cwd', 'exe']) {
      try {
        named.push(fs.readlinkSync(path.join(at, link)));
      } catch {
        // ended meanwhile, or a kernel thread
      }
    }
    try {
      named.push(...fs.readFileSync(path.join(at, 'cmdline'), 'utf8').split('\0').flatMap(pathsIn));
    } catch {
      // ended meanwhile
    }
  }
  return named;
}

/** The absolute paths in one argument (`/a/b`, `--config=/a/b`). @param {string} arg */
function pathsIn(arg) {
  return arg.split(/[=:,]/).filter((part) => part.startsWith('/'));
}

/**
 * A checkout's app copy removed under its lock (skipped while another render holds it); its twins too.
 * @param {string} dir
 */
function removeCopy(dir) {
  /** @type {number} */
  let lock;
  try {
    // never made here: a directory being removed meanwhile is not given a file again
    lock = fs.openSync(path.join(dir, 'app.lock'), 'r');
  } catch {
    return;
  }
  try {
    execFileSync('flock', ['--exclusive', '--nonblock', '3'], { stdio: ['ignore', 'ignore', 'ignore', lock] });
  } catch {
    fs.closeSync(lock);
    return;
  }
  try {
    const copies = fs.readdirSync(dir).filter((entry) => entry === 'app' || /^app\.(old\.)?\d+$/.test(entry));
    for (const name of copies) fs.rmSync(path.join(dir, name), { recursive: true, force: true });
    // (another render may have removed it while this one waited to look)
    if (copies.length) process.stderr.write(`${path.join(dir, 'app')} removed: its checkout is gone\n`);
  } finally {
    fs.closeSync(lock);
  }
}

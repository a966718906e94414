import fs from 'node:fs';
import net from 'node:net';
import { alive } from '../../lib/src/process-tree.js';

/** @param {number} port @returns {Promise<boolean>} */
function canListen(port) {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

const taken = new Set();

// The ports handed out by every test process of this machine (the test files run at once, each a process;
// a second run, the fresh-machine stage's): a file per port naming the process it went to. A port free when
// one file picked it could be bound by another file's service before the first one's started (seen once:
// a second origin whose port another process took answered nothing of its own).
const CLAIMS = '/tmp/image-cdn-stack-test-ports';
/** the directory made (or found) by this process: made once, again only if it is gone */
let claimsMade = false;

/** the ports this process claimed: their files removed when it exits (one killed leaves them, taken over later) */
const claimed = new Set();
process.on('exit', () => {
  for (const port of claimed) {
    try {
      if (Number(fs.readFileSync(`${CLAIMS}/${port}`, 'utf8')) === process.pid) fs.unlinkSync(`${CLAIMS}/${port}`);
    } catch {
      // gone already, or another user's
    }
  }
});

function makeClaims() {
  claimsMade = true;
  try {
    fs.mkdirSync(CLAIMS, { recursive: true, mode: 0o1777 });
    fs.chmodSync(CLAIMS, 0o1777);
  } catch {
    // another user's directory: sticky and open to all already
  }
}

/**
 * Claims `port` for this process across the machine: false when a live process claimed it already.
 * @param {number} port @param {boolean} [again] asked once more after the directory was made again
 */
function claim(port, again = false) {
  const file = `${CLAIMS}/${port}`;
  if (!claimsMade) makeClaims();
  try {
    fs.writeFileSync(file, String(process.pid), { flag: 'wx' });
    return true;
  } catch (err) {
    const { code } = /** @type {NodeJS.ErrnoException} */ (err);
    if (code === 'ENOENT' && !again) {
      // the directory removed since (a clean-up of /tmp): made again, the port asked once more
      makeClaims();
      return claim(port, true);
    }
    if (code !== 'EEXIST') return false;
  }
  try {
    const holder = Number(fs.readFileSync(file, 'utf8'));
    if (holder > 0 && alive(holder)) return holder === process.pid;
    // left by a process gone: taken over, unless another process took it over at the same moment
    fs.writeFileSync(file, String(process.pid));
    return Number(fs.readFileSync(file, 'utf8')) === process.pid;
  } catch {
    return false; // another user's
  }
}

/**
 * A free TCP port on loopback, below Linux's ephemeral range (32768+): a port the kernel handed out
 * could be handed out again as the local port of some outgoing connection before our server binds it.
 * Claimed for this process (see CLAIMS), so no other test process of the machine is given it meanwhile.
 * @returns {Promise<number>}
 */
export async function freePort() {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    if (taken.has(port)) continue;
    taken.add(port);
    if (claim(port)) claimed.add(port);
    if (claimed.has(port) && (await canListen(port))) return port;
  }
}

/** Waits until `check` resolves truthy, polling. @param {() => Promise<unknown>} check @param {number} [ms] @param {string} [what] */
export async function waitFor(check, ms = 10_000, what = 'condition') {
  const deadline = Date.now() + ms;
  let lastError;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch (err) {
      lastError = err;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out waiting for ${what}${lastError ? `: ${/** @type {Error} */ (lastError).message}` : ''}`);
}

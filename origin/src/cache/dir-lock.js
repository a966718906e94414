// One process per directory, wherever the processes run: two origins appending to one result cache write over
// each other's records, and one serves the other's bytes as its variant. A lock file names its holder: its
// pid, where that pid means something (the kernel's boot and the pid namespace) and its host name, and the
// holder renews it (its mtime) every few seconds. A pid in this pid namespace is asked whether it lives. A
// holder elsewhere (another container sharing the volume: each runs its origin as pid 1, so a pid alone said
// "mine" to both) holds the directory while it renews the lock; a lock left by this container's earlier run
// (the same host name, another pid namespace) is taken over at once. A holder that finds its lock taken
// over stops using the directory (`onLost`).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { alive } from '@stack/lib/src/process-tree.js';

/** @typedef {{ pid: number, space: string, host: string, renewedAt: number }} Holder */

/** @param {() => string} how @returns {string} */
const readOr = (how) => {
  try {
    return how().trim();
  } catch {
    return '';
  }
};

const BOOT = readOr(() => fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8'));
/** Where this process's pid means something: the kernel's boot and this pid namespace. */
const SPACE = `${BOOT}/${readOr(() => fs.readlinkSync('/proc/self/ns/pid'))}`;

export class DirLock {
  /**
   * @param {string} file
   * @param {{ renewMs?: number, staleMs?: number, onLost?: (holder: Holder | null) => void }} [options]
   *   staleMs: a holder elsewhere that has not renewed its lock for that long is gone
   */
  constructor(file, { renewMs = 3000, staleMs = 15_000, onLost = () => {} } = {}) {
    this.file = file;
    this.renewMs = renewMs;
    this.staleMs = staleMs;
    this.onLost = onLost;
    this.me = { pid: process.pid, space: SPACE, host: os.hostname() };
    /** @type {NodeJS.Timeout | undefined} */
    this.timer = undefined;
  }

  /** The lock's holder as its file says, null when there is none. @returns {Holder | null} */
  holder() {
    let text;
    let renewedAt;
    try {
      text = fs.readFileSync(this.file, 'utf8');
      renewedAt = fs.statSync(this.file).mtimeMs;
    } catch (err) {
      if (/** @type {NodeJS.ErrnoException} */ (err).code === 'ENOENT') return null;
      throw err;
    }
    // an older origin's lock: a pid alone, of this pid namespace
    if (/^\d+$/.test(text.trim())) return { ...this.me, pid: Number(text), renewedAt };
    try {
      const { pid, space, host } = JSON.parse(text);
      return { pid: Number(pid), space: String(space), host: String(host), renewedAt };
    } catch {
      return null; // cut short (a crash while it was written): nobody's
    }
  }

  /** @param {Holder} holder */
  isMe(holder) {
    return holder.pid === this.me.pid && holder.space === this.me.space;
  }

  /** Whether another process holds the lock now. @param {Holder} holder */
  heldBy(holder) {
    if (this.isMe(holder)) return false;
    if (holder.space === this.me.space) return alive(holder.pid);
    // this container's earlier run (restarted: a new pid namespace, the same host and boot)
    if (holder.host === this.me.host && holder.space.split('/')[0] === BOOT) return false;
    return Date.now() - holder.renewedAt < this.staleMs;
  }

  /**
   * Waits while a holder elsewhere may be gone without a word (a pod replaced after its predecessor was
   * killed, whose lock is not stale yet): until its lock is stale or gone, at most `staleMs` and a renewal
   * (a holder still renewing it then is there: `take` refuses). A holder of this pid namespace is not waited
   * for: it lives or not. @param {(holder: Holder) => void} [onWait] told once, when it waits
   */
  async waitForStale(onWait = () => {}) {
    const deadline = Date.now() + this.staleMs + this.renewMs;
    for (let told = false; ; told = true) {
      const holder = this.holder();
      if (!holder || holder.space === this.me.space || !this.heldBy(holder) || Date.now() > deadline) return;
      if (!told) onWait(holder);
      await new Promise((resolve) => setTimeout(resolve, Math.min(500, this.renewMs)));
    }
  }

  /** Takes the lock, or throws saying who holds it; renewed from now on until `release`. */
  take() {
    const holder = this.holder();
    if (holder && this.heldBy(holder)) {
      const where =
        holder.space === this.me.space ? '' : ` on ${holder.host} (another container or machine sharing it)`;
      throw new Error(`${path.dirname(this.file)} is in use by process ${holder.pid}${where}`);
    }
    // whole or not at all for a reader (a file being written reads empty, as nobody's)
    const temp = `${this.file}.${process.pid}.${this.me.host}`;
    fs.writeFileSync(temp, JSON.stringify(this.me));
    fs.renameSync(temp, this.file);
    clearInterval(this.timer);
    this.timer = setInterval(() => this.renew(), this.renewMs).unref();
  }

  /** Renews the lock, or says it was lost (taken over, or removed by hand). */
  renew() {
    let holder = null;
    try {
      holder = this.holder();
      if (holder && this.isMe(holder)) {
        const now = new Date();
        fs.utimesSync(this.file, now, now);
        return;
      }
    } catch {
      return; // unreadable for a moment: asked again at the next renewal
    }
    clearInterval(this.timer);
    this.onLost(holder);
  }

  /** Gives the lock up (if it is still this process's). */
  release() {
    clearInterval(this.timer);
    try {
      const holder = this.holder();
      if (holder && this.isMe(holder)) fs.rmSync(this.file);
    } catch {
      // already gone
    }
  }
}

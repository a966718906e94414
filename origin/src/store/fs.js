import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

/** @typedef {import('./index.js').Store} StoreContract */

/** Syncs a file or directory to disk. @param {string} target */
export async function fsyncPath(target) {
  const handle = await fs.open(target, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Uploaded originals on the filesystem, sharded by the key's last characters (keys share their prefix).
 * A file appears under its key only by rename after fsync, so a crash never leaves a half file there.
 * @implements {StoreContract}
 */
export class FsStore {
  /** @param {string} dir */
  constructor(dir) {
    this.dir = path.resolve(dir, 'uploads');
    this.tmpDir = path.resolve(dir, 'tmp');
    /** its files are the uploads themselves, not copies: one gone is gone */
    this.copies = false;
  }

  async init() {
    await fs.mkdir(this.dir, { recursive: true });
    await fs.mkdir(this.tmpDir, { recursive: true });
  }

  /** @param {string} key a validated key */
  pathFor(key) {
    return path.join(this.dir, key.slice(-2), key.slice(-4, -2), key);
  }

  /** A fresh temporary path on the same filesystem (rename stays atomic). */
  tempPath() {
    return path.join(this.tmpDir, `${Date.now()}-${randomBytes(8).toString('hex')}`);
  }

  /** @param {string} key @returns {Promise<{ path: string, size: number, mtime: Date } | null>} */
  async stat(key) {
    const file = this.pathFor(key);
    try {
      const info = await fs.stat(file);
      return { path: file, size: info.size, mtime: info.mtime };
    } catch {
      return null;
    }
  }

  /**
   * Moves a complete, synced temp file under its key, durably. Content-addressed: an existing file wins.
   * A record (the bytes are a scrubbed upload's) is written beside it first (`<key>.json`).
   * @param {string} key @param {string} tempFile @param {import('./record.js').StoredRecord | null} [record]
   */
  async put(key, tempFile, record = null) {
    const target = this.pathFor(key);
    await fs.mkdir(path.dirname(target), { recursive: true });
    if (record) {
      await fs.writeFile(`${target}.json.tmp`, JSON.stringify(record));
      await fsyncPath(`${target}.json.tmp`);
      await fs.rename(`${target}.json.tmp`, `${target}.json`);
    }
    await fsyncPath(tempFile);
    await fs.rename(tempFile, target);
    await fsyncPath(path.dirname(target));
  }

  /** The record stored with an upload, or null. @param {string} key @returns {Promise<import('./record.js').StoredRecord | null>} */
  async record(key) {
    try {
      return JSON.parse(await fs.readFile(`${this.pathFor(key)}.json`, 'utf8'));
    } catch {
      return null;
    }
  }

  /** Deletes an upload (a takedown with TAKEDOWN_DELETE_UPLOADS). @param {string} key a validated key */
  async remove(key) {
    await fs.rm(this.pathFor(key), { force: true });
    await fs.rm(`${this.pathFor(key)}.json`, { force: true });
  }
}

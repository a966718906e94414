import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { alive } from '@stack/lib/src/process-tree.js';

/**
 * A size-bounded cache of files on disk (the fetched originals: large, written while they stream in, read by
 * path), least recently used evicted first. The index lives in memory (a Map keeps insertion order: a hit
 * moves the entry to the end) and is rebuilt from the directory on start. Files are named `<key>.<ext>` so
 * the extension (the content's format) survives a restart.
 */
export class DiskLru {
  /** @param {string} dir @param {number} maxBytes */
  constructor(dir, maxBytes) {
    this.dir = path.resolve(dir);
    this.maxBytes = maxBytes;
    this.totalBytes = 0;
    /** @type {Map<string, { ext: string, size: number }>} */
    this.entries = new Map();
    /** shard directories known to exist: one mkdir per shard, not per file */
    this.shards = new Set();
    // the process's pid (a start clears the temp files of processes gone, not those of one still finishing
    // its requests: a held restart's, lib/src/service.js) and a random part per instance (two caches on one
    // directory by mistake still never share a temp name), a count after it
    this.tempPrefix = `${process.pid}-${randomBytes(6).toString('hex')}`;
    this.temps = 0;
  }

  /**
   * The index from the directory, and the temp files of processes gone removed. The process before this one
   * may still be finishing its requests (a held restart): a file it evicts meanwhile is not counted, and its
   * downloads under way are left to it.
   */
  async init() {
    const temp = path.join(this.dir, 'tmp');
    await fs.mkdir(temp, { recursive: true });
    const found = [];
    for (const shard of await fs.readdir(this.dir)) {
      if (shard === 'tmp') continue;
      for (const name of await fs.readdir(path.join(this.dir, shard)).catch(() => [])) {
        const stat = await fs.stat(path.join(this.dir, shard, name)).catch(() => null);
        if (!stat) continue;
        const [key, ext = ''] = name.split('.');
        found.push({ key, ext, size: stat.size, atime: stat.atimeMs });
      }
    }
    found.sort((a, b) => a.atime - b.atime);
    for (const { key, ext, size } of found) this.remember(key, ext, size);
    for (const name of await fs.readdir(temp)) {
      const pid = Number(name.split('-')[0]);
      if (!(pid > 0 && pid !== process.pid && alive(pid))) await fs.rm(path.join(temp, name), { force: true });
    }
  }

  /** @param {string} key @param {string} ext */
  pathFor(key, ext) {
    return path.join(this.dir, key.slice(0, 2), `${key}.${ext}`);
  }

  /** A name no other temp file of this cache has: the process's own prefix (tmp/ is emptied on start) and a count. */
  tempPath() {
    this.temps += 1;
    return path.join(this.dir, 'tmp', `${this.tempPrefix}-${this.temps}`);
  }

  /** @param {string} key @returns {{ path: string, ext: string, size: number } | null} */
  get(key) {
    const entry = this.entries.get(key);
    if (!entry) return null;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return { path: this.pathFor(key, entry.ext), ...entry };
  }

  /** Moves a finished temp file into the cache. @param {string} key @param {string} ext @param {string} tempFile */
  async putFile(key, ext, tempFile) {
    const { size } = await fs.stat(tempFile);
    return this.place(key, ext, tempFile, size);
  }

  /** @param {string} key @param {string} ext @param {string} tempFile @param {number} size */
  async place(key, ext, tempFile, size) {
    const target = this.pathFor(key, ext);
    const shard = path.dirname(target);
    if (!this.shards.has(shard)) {
      await fs.mkdir(shard, { recursive: true });
      this.shards.add(shard);
    }
    await fs.rename(tempFile, target);
    this.remember(key, ext, size);
    await this.evict(key);
    return target;
  }

  /** @param {string} key @param {string} ext @param {number} size */
  remember(key, ext, size) {
    const old = this.entries.get(key);
    if (old) this.totalBytes -= old.size;
    this.entries.delete(key);
    this.entries.set(key, { ext, size });
    this.totalBytes += size;
  }

  /** Deletes a key and its file (a takedown). @param {string} key */
  async remove(key) {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.forget(key);
    await fs.rm(this.pathFor(key, entry.ext), { force: true });
  }

  /** Drops a key whose file is gone (removed by hand): the next put writes it again. @param {string} key */
  forget(key) {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.totalBytes -= entry.size;
  }

  /**
   * Oldest first, down to the bound; never `keep`, the file just placed for a request that is about to read
   * it (an original larger than the whole bound was a 500): the bound holds but for that newest file.
   * @param {string} [keep]
   */
  async evict(keep) {
    for (const [key, entry] of this.entries) {
      if (this.totalBytes <= this.maxBytes) break;
      if (key === keep) continue;
      this.entries.delete(key);
      this.totalBytes -= entry.size;
      await fs.rm(this.pathFor(key, entry.ext), { force: true });
    }
  }
}

// The kept originals of warmed posts (#41): a remote original fetched for a warmer's request is kept here as
// well as in the originals cache (a hard link where both are on one filesystem), and never evicted, so a
// post's image whose host later fails or disappears is still made from it: the archive is asked before the
// failure cache and the host. A takedown removes its copy. One directory per origin (DATA_DIR/archive).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

/** @param {string} dataDir */
export function createArchive(dataDir) {
  const dir = path.join(dataDir, 'archive');
  /** @param {string} id a source id (sha256 hex of its URL) */
  const fileOf = (id) => path.join(dir, id.slice(0, 2), id);

  return {
    /** The kept original of `id`, or null. @param {string} id @returns {Promise<string | null>} */
    async get(id) {
      try {
        await fs.access(fileOf(id));
        return fileOf(id);
      } catch {
        return null;
      }
    },
    /**
     * Keeps `file` (an original just fetched) as `id`'s, once: each warmed size of an image asks again.
     * @param {string} id @param {string} file
     */
    async keep(id, file) {
      const target = fileOf(id);
      if (await this.get(id)) return;
      await fs.mkdir(path.dirname(target), { recursive: true });
      // unique per call: two sizes of one image may keep it at the same moment
      const temp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
      try {
        await fs.link(file, temp);
      } catch {
        await fs.copyFile(file, temp);
      }
      await fs.rename(temp, target);
    },
    /** @param {string} id */
    remove: (id) => fs.rm(fileOf(id), { force: true }),
  };
}
/** @typedef {ReturnType<typeof createArchive>} Archive */

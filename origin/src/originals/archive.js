// The kept originals of warmed posts (#41): a remote original fetched for a warmer's request is kept here as
// well as in the originals cache, so a post's image whose host later fails or disappears is still made from
// it: the archive is asked before the failure cache and the host. A takedown removes its copy. One directory
// per origin (DATA_DIR/archive).
//
// Bounded and deduplicated (#51: one image under 64 URLs was kept 64 times, and nothing was ever evicted):
// each content once, under its sha256 (blobs/), each source id a hard link to its content (ids/); the
// contents count against WARM_ARCHIVE_BYTES, and past it the oldest kept go first. The index is the
// directory itself, read at start: an id and its blob share an inode.
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';

/** @typedef {{ size: number, ids: Set<string> }} Blob */

/** sha256 hex of a file's content, streamed. @param {string} file @returns {Promise<string>} */
async function sha256File(file) {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk);
  return hash.digest('hex');
}

/** The files two levels down a directory (xx/name), [] when it is missing. @param {string} dir */
async function filesIn(dir) {
  const shards = await fs.readdir(dir).catch(() => /** @type {string[]} */ ([]));
  const files = await Promise.all(
    shards.map(async (shard) =>
      (await fs.readdir(path.join(dir, shard)).catch(() => /** @type {string[]} */ ([])))
        .filter((name) => !name.endsWith('.tmp'))
        .map((name) => path.join(dir, shard, name)),
    ),
  );
  return files.flat();
}

/**
 * @param {string} dataDir
 * @param {{ maxBytes: number, onChange?: (bytes: number) => void, onEvict?: (bytes: number) => void,
 *   onKept?: (bytes: number) => void }} options onKept: a new id's original (what the warmer had fetched)
 */
export function createArchive(dataDir, { maxBytes, onChange = () => {}, onEvict = () => {}, onKept = () => {} }) {
  const dir = path.join(dataDir, 'archive');
  const blobFile = (/** @type {string} */ sha) => path.join(dir, 'blobs', sha.slice(0, 2), sha);
  const idFile = (/** @type {string} */ id) => path.join(dir, 'ids', id.slice(0, 2), id);
  /** contents, oldest kept first (a Map keeps insertion order) @type {Map<string, Blob>} */
  const blobs = new Map();
  /** @type {Map<string, string>} id -> sha256 */
  const ids = new Map();
  /** keeps under way, one per id @type {Map<string, Promise<void>>} */
  const keeping = new Map();
  let bytes = 0;
  const ready = load();

  /** The index from the directory: blobs by age, each id to the blob whose inode it shares. */
  async function load() {
    // (a file the process before this one removed meanwhile, finishing its requests at a held restart: skipped)
    const found = (
      await Promise.all(
        (await filesIn(path.join(dir, 'blobs'))).map(async (file) => ({
          file,
          stat: await fs.stat(file).catch(() => null),
        })),
      )
    ).flatMap(({ file, stat }) => (stat ? [{ file, stat }] : []));
    /** @type {Map<number, string>} */
    const byInode = new Map();
    for (const { file, stat } of found.sort((a, b) => a.stat.mtimeMs - b.stat.mtimeMs)) {
      const sha = path.basename(file);
      blobs.set(sha, { size: stat.size, ids: new Set() });
      byInode.set(stat.ino, sha);
      bytes += stat.size;
    }
    for (const file of await filesIn(path.join(dir, 'ids'))) {
      const stat = await fs.stat(file).catch(() => null);
      if (!stat) continue;
      const sha = byInode.get(stat.ino);
      if (!sha) await fs.rm(file, { force: true });
      else {
        ids.set(path.basename(file), sha);
        blobs.get(sha)?.ids.add(path.basename(file));
      }
    }
    // before contents were kept once: archive/xx/<id>, kept again in the new layout
    for (const shard of await fs.readdir(dir).catch(() => /** @type {string[]} */ ([]))) {
      if (shard === 'blobs' || shard === 'ids') continue;
      for (const file of (await fs.readdir(path.join(dir, shard)).catch(() => [])).map((name) =>
        path.join(dir, shard, name),
      )) {
        if (!file.endsWith('.tmp')) await add(path.basename(file), file, { legacy: true }).catch(() => {});
        await fs.rm(file, { force: true });
      }
      await fs.rmdir(path.join(dir, shard)).catch(() => {});
    }
    await evict();
  }

  /** A hard link of `from` at `to` (a copy where links fail), through a unique temporary name. @param {string} from @param {string} to */
  async function place(from, to) {
    await fs.mkdir(path.dirname(to), { recursive: true });
    const temp = `${to}.${randomBytes(6).toString('hex')}.tmp`;
    try {
      await fs.link(from, temp);
    } catch {
      await fs.copyFile(from, temp);
    }
    await fs.rename(temp, to);
  }

  /** @param {string} id @param {string} file @param {{ legacy?: boolean }} [options] legacy: kept before, not fetched now */
  async function add(id, file, { legacy = false } = {}) {
    if (ids.has(id)) return;
    const { size } = await fs.stat(file);
    if (!legacy) onKept(size);
    if (size > maxBytes) return;
    const sha = await sha256File(file);
    let blob = blobs.get(sha);
    if (!blob) {
      await place(file, blobFile(sha));
      blob = { size, ids: new Set() };
      blobs.set(sha, blob);
      bytes += size;
    }
    await place(blobFile(sha), idFile(id));
    blob.ids.add(id);
    ids.set(id, sha);
    await evict(sha);
  }

  /** The oldest contents out until the archive fits its bytes. @param {string} [keep] the content just kept */
  async function evict(keep) {
    for (const [sha, blob] of blobs) {
      if (bytes <= maxBytes) break;
      if (sha === keep) continue;
      await dropBlob(sha, blob);
      onEvict(blob.size);
    }
    onChange(bytes);
  }

  /** @param {string} sha @param {Blob} blob */
  async function dropBlob(sha, blob) {
    blobs.delete(sha);
    bytes -= blob.size;
    for (const id of blob.ids) ids.delete(id);
    await Promise.all([
      ...[...blob.ids].map((id) => fs.rm(idFile(id), { force: true })),
      fs.rm(blobFile(sha), { force: true }),
    ]);
  }

  return {
    /** The kept original of `id`, or null. @param {string} id @returns {Promise<string | null>} */
    async get(id) {
      await ready;
      return ids.has(id) ? idFile(id) : null;
    },
    /**
     * Keeps `file` (an original just fetched) as `id`'s, once (each warmed size of an image asks again),
     * its content once however many ids it has. @param {string} id @param {string} file
     */
    async keep(id, file) {
      await ready;
      if (ids.has(id)) return;
      let pending = keeping.get(id);
      if (!pending) {
        pending = add(id, file).finally(() => keeping.delete(id));
        keeping.set(id, pending);
      }
      await pending;
    },
    /** A taken-down original out: its id, and its content where no other id holds it. @param {string} id */
    async remove(id) {
      await ready;
      const sha = ids.get(id);
      ids.delete(id);
      await fs.rm(idFile(id), { force: true });
      const blob = sha ? blobs.get(sha) : undefined;
      if (!sha || !blob) return;
      blob.ids.delete(id);
      if (!blob.ids.size) await dropBlob(sha, blob);
      onChange(bytes);
    },
    /** What is kept: contents, their bytes, ids. */
    async size() {
      await ready;
      return { contents: blobs.size, bytes, ids: ids.size };
    },
  };
}
/** @typedef {ReturnType<typeof createArchive>} Archive */

// An upload's file scrubbed where it lies. A JPEG's metadata is all before its first scan: only that head is
// read, and when the edit keeps its length (EXIF and XMP are edited in place) it is written back over the
// file's first bytes: the megabytes of compressed pixels are neither read nor written again. Anything else is
// read whole and written anew beside it.
import { createReadStream, createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { scrubMetadata } from './index.js';
import { ScrubError } from './tiff.js';

const READ_STEP = 64 * 1024;
const SCAN = Buffer.from([0xff, 0xda, 0, 2]);
const MAX_HEAD = 32 * 1024 * 1024;

/**
 * @param {string} file the upload @param {string} format as probed @param {'location' | 'all'} mode
 * @returns {Promise<{ path: string, removed: string[] }>} `path`: the file itself (edited in place, or left as
 *   it was when `removed` is empty) or `${file}.scrubbed`
 */
export async function scrubFile(file, format, mode) {
  if (format !== 'jpeg') {
    const { data, removed } = scrubMetadata(await fs.readFile(file), format, mode);
    if (!removed.length) return { path: file, removed };
    await fs.writeFile(`${file}.scrubbed`, data);
    return { path: `${file}.scrubbed`, removed };
  }
  const handle = await fs.open(file, 'r+');
  try {
    const head = await jpegHead(handle);
    // the head, and a start of scan for the editor to stop at (taken off again)
    const { data, removed } = scrubMetadata(Buffer.concat([head, SCAN]), 'jpeg', mode);
    if (!removed.length) return { path: file, removed };
    const edited = data.subarray(0, data.length - SCAN.length);
    if (edited.length === head.length) {
      await handle.write(edited, 0, edited.length, 0);
      return { path: file, removed };
    }
    const out = createWriteStream(`${file}.scrubbed`);
    out.write(edited);
    await pipeline(createReadStream(file, { start: head.length }), out);
    return { path: `${file}.scrubbed`, removed };
  } finally {
    await handle.close();
  }
}

/**
 * A JPEG's bytes before its first scan (start of scan or end of image), read segment by segment.
 * @param {import('node:fs/promises').FileHandle} handle
 */
async function jpegHead(handle) {
  let buf = Buffer.alloc(0);
  const ensure = async (/** @type {number} */ size) => {
    while (buf.length < size) {
      if (size > MAX_HEAD) throw new ScrubError('JPEG metadata past 32 MB');
      const more = Buffer.alloc(Math.max(READ_STEP, size - buf.length));
      const { bytesRead } = await handle.read(more, 0, more.length, buf.length);
      if (!bytesRead) throw new ScrubError('a JPEG without a scan');
      buf = Buffer.concat([buf, more.subarray(0, bytesRead)]);
    }
  };
  await ensure(4);
  if (buf[0] !== 0xff || buf[1] !== 0xd8) throw new ScrubError('not a JPEG');
  let at = 2;
  for (;;) {
    await ensure(at + 4);
    if (buf[at] !== 0xff) throw new ScrubError('a JPEG segment that is misplaced');
    const marker = buf[at + 1];
    if (marker === 0xff) {
      at += 1;
      continue;
    }
    if (marker === 0xda || marker === 0xd9) return buf.subarray(0, at);
    at += 2 + buf.readUInt16BE(at + 2);
  }
}

// A GIF's blocks: the frames, their timing (graphic control) and the loop count (NETSCAPE2.0) copied as they
// are; the XMP application extension dropped (where location would be); `all` drops comments and every other
// application extension too.
import { ScrubError } from './tiff.js';

const LOOPING = new Set(['NETSCAPE2.0', 'ANIMEXTS1.0']);

/** The end of the sub-blocks starting at `at` (past the zero-length terminator). @param {Buffer} input @param {number} at */
function subBlocksEnd(input, at) {
  for (;;) {
    if (at >= input.length) throw new ScrubError('GIF sub-blocks that are cut');
    const size = input[at];
    at += 1 + size;
    if (size === 0) return at;
  }
}

/** @param {Buffer} input @param {'location' | 'all'} mode @returns {{ data: Buffer, removed: string[] }} */
export function scrubGif(input, mode) {
  const head = input.toString('latin1', 0, 6);
  if (input.length < 13 || (head !== 'GIF87a' && head !== 'GIF89a')) throw new ScrubError('not a GIF');
  const packed = input[10];
  let at = 13 + (packed & 0x80 ? 3 * 2 ** ((packed & 7) + 1) : 0);
  const parts = [input.subarray(0, at)];
  const removed = [];
  for (;;) {
    if (at >= input.length) throw new ScrubError('a GIF without its trailer');
    const kind = input[at];
    if (kind === 0x3b) {
      parts.push(input.subarray(at, at + 1));
      break;
    }
    if (kind === 0x2c) {
      if (at + 10 > input.length) throw new ScrubError('a GIF frame that is cut');
      const local = input[at + 9];
      const lzw = at + 10 + (local & 0x80 ? 3 * 2 ** ((local & 7) + 1) : 0);
      const end = subBlocksEnd(input, lzw + 1);
      parts.push(input.subarray(at, end));
      at = end;
      continue;
    }
    if (kind !== 0x21 || at + 2 > input.length) throw new ScrubError('a GIF block of no known kind');
    const label = input[at + 1];
    const end = subBlocksEnd(input, at + 2);
    const identifier = label === 0xff && input[at + 2] === 11 ? input.toString('latin1', at + 3, at + 14) : '';
    const drop =
      (label === 0xff && identifier === 'XMP DataXMP') ||
      (mode === 'all' && (label === 0xfe || (label === 0xff && !LOOPING.has(identifier))));
    if (drop) removed.push(label === 0xfe ? 'comment' : identifier === 'XMP DataXMP' ? 'xmp' : 'application');
    else parts.push(input.subarray(at, end));
    at = end;
  }
  return { data: Buffer.concat(parts), removed };
}

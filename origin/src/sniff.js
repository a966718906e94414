import fs from 'node:fs/promises';

/**
 * The content type of a stored original, from its first bytes (never from what the uploader claimed).
 * @param {string} file
 */
export async function sniffFile(file) {
  const handle = await fs.open(file, 'r');
  try {
    const head = Buffer.alloc(16);
    await handle.read(head, 0, 16, 0);
    return sniff(head);
  } finally {
    await handle.close();
  }
}

/** @param {Buffer} head */
export function sniff(head) {
  const ascii = head.toString('latin1');
  if (head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return 'image/jpeg';
  if (ascii.startsWith('\x89PNG\r\n\x1a\n')) return 'image/png';
  if (ascii.startsWith('GIF87a') || ascii.startsWith('GIF89a')) return 'image/gif';
  if (ascii.startsWith('RIFF') && ascii.slice(8, 12) === 'WEBP') return 'image/webp';
  if (ascii.slice(4, 12) === 'ftypavif' || ascii.slice(4, 12) === 'ftypavis') return 'image/avif';
  if (/^ftyp(heic|heix|mif1|msf1)/.test(ascii.slice(4, 12))) return 'image/heic';
  if (ascii.startsWith('II*\0') || ascii.startsWith('MM\0*')) return 'image/tiff';
  return 'application/octet-stream';
}

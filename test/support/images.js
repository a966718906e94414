import fs from 'node:fs';
import sharp from 'sharp';

/** Debian's plasma-workspace-wallpapers: real photographs. */
export const WALLPAPERS = '/usr/share/wallpapers';

/** The path of a real photograph, e.g. photo('Path', '1920x1080'). @param {string} name @param {string} size */
export function photo(name, size) {
  const file = `${WALLPAPERS}/${name}/contents/images/${size}.jpg`;
  if (!fs.existsSync(file)) throw new Error(`missing ${file}: apt-get install plasma-workspace-wallpapers`);
  return file;
}

/** A solid image. @param {number} width @param {number} height @param {'jpeg'|'png'|'webp'|'gif'} format @param {string} [color] */
export function solid(width, height, format, color = '#c04020') {
  return sharp({ create: { width, height, channels: 3, background: color } }).toFormat(format).toBuffer();
}

/** A JPEG with an EXIF orientation tag: stored as width×height, shown rotated. @param {number} width @param {number} height @param {number} orientation */
export function oriented(width, height, orientation) {
  return sharp({ create: { width, height, channels: 3, background: '#3060c0' } })
    .jpeg()
    .withMetadata({ orientation })
    .toBuffer();
}

/** An animated image of `frames` frames, each a different colour. @param {number} width @param {number} height @param {number} frames @param {'gif'|'webp'} format */
export async function animated(width, height, frames, format) {
  const colours = ['#ff0000', '#00ff00', '#0000ff', '#ffff00'];
  const inputs = await Promise.all(
    Array.from({ length: frames }, (_, i) => sharp({ create: { width, height, channels: 3, background: colours[i % 4] } }).png().toBuffer()),
  );
  return sharp(inputs, { join: { animated: true } }).toFormat(format, { loop: 0 }).toBuffer();
}

/**
 * A PNG that claims `width`×`height` in its header but is a few KB: a decompression bomb.
 * @param {number} width @param {number} height
 */
export async function pngBomb(width, height) {
  const { deflateSync, crc32 } = await import('node:zlib');
  const chunk = (/** @type {string} */ type, /** @type {Buffer} */ body) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(body.length);
    const typed = Buffer.concat([Buffer.from(type), body]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(typed) >>> 0);
    return Buffer.concat([length, typed, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 1; // bit depth 1
  header[9] = 0; // greyscale
  const rows = deflateSync(Buffer.alloc(Math.ceil(width / 8) + 1, 0)); // one row only: the rest is missing
  return Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), chunk('IHDR', header), chunk('IDAT', rows), chunk('IEND', Buffer.alloc(0))]);
}

/** The mean absolute difference of two equally long pixel buffers, in levels of 255. @param {Buffer} a @param {Buffer} b */
export function meanDifference(a, b) {
  let sum = 0;
  for (let i = 0; i < a.length; i += 1) sum += Math.abs(a[i] - b[i]);
  return sum / a.length;
}

/** Decodes an answer: format, size, frames. @param {Buffer} data */
export async function decode(data) {
  const meta = await sharp(data, { animated: true }).metadata();
  return { format: meta.format, width: meta.width, height: meta.pageHeight || meta.height, frames: meta.pages || 1, orientation: meta.orientation };
}

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';

/** Debian's plasma-workspace-wallpapers, or a copy of them (WALLPAPERS_DIR: a machine where nothing can be installed) */
export const WALLPAPERS = process.env.WALLPAPERS_DIR || '/usr/share/wallpapers';

/** The path of a real photograph, e.g. photo('Path', '1920x1080'). @param {string} name @param {string} size */
export function photo(name, size) {
  const file = `${WALLPAPERS}/${name}/contents/images/${size}.jpg`;
  if (!fs.existsSync(file)) throw new Error(`missing ${file}: apt-get install plasma-workspace-wallpapers`);
  return file;
}

/** A solid image. @param {number} width @param {number} height @param {'jpeg'|'png'|'webp'|'gif'} format @param {string} [color] */
export function solid(width, height, format, color = '#c04020') {
  return sharp({ create: { width, height, channels: 3, background: color } })
    .toFormat(format)
    .toBuffer();
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
    Array.from({ length: frames }, (_, i) =>
      sharp({ create: { width, height, channels: 3, background: colours[i % 4] } })
        .png()
        .toBuffer(),
    ),
  );
  return sharp(inputs, { join: { animated: true } })
    .toFormat(format, { loop: 0 })
    .toBuffer();
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
  return Buffer.concat([
    Buffer.from('89504e470d0a1a0a', 'hex'),
    chunk('IHDR', header),
    chunk('IDAT', rows),
    chunk('IEND', Buffer.alloc(0)),
  ]);
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
  return {
    format: meta.format,
    width: meta.width,
    height: meta.pageHeight || meta.height,
    frames: meta.pages || 1,
    orientation: meta.orientation,
  };
}

/** What a phone writes into a photograph: where (GPS, EXIF and XMP; the city), the device and its owner, and a portrait orientation. */
export const PHONE_METADATA = [
  '-GPSLatitude=48.8583',
  '-GPSLatitudeRef=N',
  '-GPSLongitude=2.2945',
  '-GPSLongitudeRef=E',
  '-GPSAltitude=35',
  '-Make=Apple',
  '-Model=iPhone 15',
  '-SerialNumber=F2LXK0QJHG7F',
  '-OwnerName=Jane Doe',
  '-LensSerialNumber=LS-7731',
  '-XMP-exif:GPSLatitude=48.8583',
  '-XMP-exif:GPSLongitude=2.2945',
  '-XMP-photoshop:City=Paris',
  '-XMP-photoshop:Country=France',
  '-Orientation#=6',
];

/**
 * `bytes` with metadata written by exiftool (Debian's libimage-exiftool-perl), a phone's by default.
 * @param {Buffer} bytes @param {string} extension @param {string[]} [tags]
 */
export function withMetadata(bytes, extension, tags = PHONE_METADATA) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exiftool-'));
  try {
    const file = path.join(dir, `photo.${extension}`);
    fs.writeFileSync(file, bytes);
    execFileSync('exiftool', ['-q', '-overwrite_original', ...tags, file]);
    return fs.readFileSync(file);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** What exiftool reads in `bytes`, as { "group:tag": value } (-G1 -n). @param {Buffer} bytes */
export function readMetadata(bytes) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exiftool-'));
  try {
    const file = path.join(dir, 'read');
    fs.writeFileSync(file, bytes);
    return /** @type {Record<string, unknown>} */ (
      JSON.parse(execFileSync('exiftool', ['-j', '-G1', '-a', '-n', file], { encoding: 'utf8' }))[0]
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The tags of `tags` that say where a photograph was taken or identify its owner's device. @param {Record<string, unknown>} tags */
export const personalTags = (tags) =>
  Object.keys(tags).filter((name) => /GPS|Serial|OwnerName|:City|Country|Location/i.test(name));

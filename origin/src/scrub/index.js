// What a stored original keeps of its metadata (UPLOAD_METADATA): `location` (the default) removes where a
// photograph was taken and what identifies its owner's device (GPS, the owner's name, serial numbers, the
// maker note) from EXIF, XMP and IPTC; `all` keeps nothing but the orientation and the colour profile;
// `none` keeps the file as it came. Never by decoding and encoding: the compressed pixels and every other
// byte stay as uploaded (the container's structure is edited, in place where offsets point into it). A file
// whose structure cannot be edited safely is a ScrubError: the caller stores a clean re-encode instead.
import { scrubGif } from './gif.js';
import { scrubHeif } from './heif.js';
import { scrubJpeg } from './jpeg.js';
import { scrubPng } from './png.js';
import { ScrubError } from './tiff.js';
import { scrubWebp } from './webp.js';

export { ScrubError };

const SCRUBBERS = { jpeg: scrubJpeg, png: scrubPng, webp: scrubWebp, gif: scrubGif, heif: scrubHeif };

/**
 * @param {Buffer} input the uploaded file @param {string} format as probe() read it (jpeg, png, webp, gif, heif, tiff)
 * @param {'location' | 'all' | 'none'} mode
 * @returns {{ data: Buffer, removed: string[] }} `removed` empty: `data` is the input
 */
export function scrubMetadata(input, format, mode) {
  if (mode === 'none') return { data: input, removed: [] };
  const scrubber = SCRUBBERS[/** @type {keyof typeof SCRUBBERS} */ (format)];
  if (!scrubber) throw new ScrubError(`no in-place editor for ${format}`);
  const result = scrubber(input, mode);
  return result.removed.length ? result : { data: input, removed: [] };
}

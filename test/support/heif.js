// HEIF files for the tests, as a phone would write them: heif-enc (Debian's libheif-examples) encodes the
// pictures, and this writes the container around them: a single picture or a grid of tiles (an iPhone's
// layout, which heif-enc does not make), with rotation (irot), mirroring (imir) and the colour boxes of the
// source. Written independently of the origin's reader (origin/src/heic/container.js), so the two check
// each other, and libheif decodes every file made here (the tests' reference).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * @typedef {{ hvcC: Buffer, colr: Buffer[], width: number, height: number, data: Buffer }} Picture
 *   one HEVC picture from heif-enc: its hvcC box and colour boxes (whole), its size and its item's data
 * @typedef {['irot', number] | ['imir', number]} Transform
 */

/** A HEIC of `source` (PNG or JPEG bytes) by heif-enc. @param {Buffer} source @param {number} [quality] */
export function heifEnc(source, quality = 85) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'heif-enc-'));
  try {
    const input = path.join(dir, source[0] === 0x89 ? 'in.png' : 'in.jpg');
    fs.writeFileSync(input, source);
    execFileSync('heif-enc', ['-q', String(quality), input, '-o', path.join(dir, 'out.heic')], { stdio: 'ignore' });
    return fs.readFileSync(path.join(dir, 'out.heic'));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** @param {Buffer} b @param {number} start @param {number} end */
function boxes(b, start, end) {
  const out = [];
  for (let at = start; at + 8 <= end;) {
    const size = b.readUInt32BE(at);
    out.push({ type: b.toString('latin1', at + 4, at + 8), start: at, end: at + size });
    at += size;
  }
  return out;
}

/** The primary picture of heif-enc's output (a single hvc1 item). @param {Buffer} heic @returns {Picture} */
export function pictureOf(heic) {
  const meta = boxes(heic, 0, heic.length).find((box) => box.type === 'meta');
  if (!meta) throw new Error('no meta box');
  const inside = boxes(heic, meta.start + 12, meta.end);
  const find = (/** @type {string} */ type) => {
    const box = inside.find((candidate) => candidate.type === type);
    if (!box) throw new Error(`no ${type} box`);
    return box;
  };
  const iprp = find('iprp');
  const ipco = boxes(heic, iprp.start + 8, iprp.end).find((box) => box.type === 'ipco');
  const properties = ipco ? boxes(heic, ipco.start + 8, ipco.end) : [];
  const whole = (/** @type {{ start: number, end: number }} */ box) => heic.subarray(box.start, box.end);
  const ispe = properties.find((box) => box.type === 'ispe');
  const hvcC = properties.find((box) => box.type === 'hvcC');
  if (!ispe || !hvcC) throw new Error('no ispe or hvcC');
  return {
    hvcC: whole(hvcC),
    colr: properties.filter((box) => box.type === 'colr').map(whole),
    width: heic.readUInt32BE(ispe.start + 12),
    height: heic.readUInt32BE(ispe.start + 16),
    data: itemData(heic, find('iloc').start),
  };
}

/** The one item's data, by its iloc entry (versions 0 and 1, one extent, offsets in the file). @param {Buffer} b @param {number} at */
function itemData(b, at) {
  const version = b[at + 8];
  const [offsetSize, lengthSize, baseSize] = [b[at + 12] >> 4, b[at + 12] & 15, b[at + 13] >> 4];
  let p = at + 16 + 2 + (version === 1 ? 2 : 0) + 2; // item count, id, [construction method], data reference
  const read = (/** @type {number} */ size) => {
    const value = size ? b.readUIntBE(p, size) : 0;
    p += size;
    return value;
  };
  const base = read(baseSize);
  if (read(2) !== 1) throw new Error('one extent expected');
  const offset = base + read(offsetSize);
  return b.subarray(offset, offset + read(lengthSize));
}

/** @param {string} type @param {Buffer[]} parts */
const box = (type, ...parts) => {
  const body = Buffer.concat(parts);
  const head = Buffer.alloc(8);
  head.writeUInt32BE(8 + body.length);
  head.write(type, 4, 'latin1');
  return Buffer.concat([head, body]);
};
/** @param {string} type @param {number} version @param {Buffer[]} parts */
const fullBox = (type, version, ...parts) => box(type, Buffer.from([version, 0, 0, 0]), ...parts);
/** @param {number[]} values @param {number} size bytes each */
const fields = (values, size) => {
  const out = Buffer.alloc(values.length * size);
  values.forEach((value, i) => out.writeUIntBE(value, i * size, size));
  return out;
};
const ispeOf = (/** @type {number} */ width, /** @type {number} */ height) =>
  fullBox('ispe', 0, fields([width, height], 4));

/**
 * A HEIF file: `pictures` as one image (one picture) or a grid of `columns` (an output of width × height),
 * with the transforms on the primary image in order; `sharedData`: every tile's location names the first
 * tile's data (a hostile file: one extent, many tiles). @param {Picture[]} pictures
 * @param {{ columns?: number, width?: number, height?: number, transforms?: Transform[], sharedData?: boolean }} [layout]
 */
export function heifFile(pictures, { columns = 1, width, height, transforms = [], sharedData = false } = {}) {
  const grid = pictures.length > 1;
  const rows = Math.ceil(pictures.length / columns);
  const [first] = pictures;
  const outWidth = width ?? first.width * columns;
  const outHeight = height ?? first.height * rows;
  const primary = grid ? pictures.length + 1 : 1;
  /** @type {Array<{ id: number, type: string, data: Buffer, properties: Array<[Buffer, boolean]> }>} */
  const items = pictures.map((picture, i) => ({
    id: i + 1,
    type: 'hvc1',
    data: picture.data,
    properties: [
      [picture.hvcC, true],
      [ispeOf(picture.width, picture.height), false],
    ],
  }));
  /** @type {Array<[Buffer, boolean]>} */
  const shown = [
    ...first.colr.map((colr) => /** @type {[Buffer, boolean]} */ ([colr, false])),
    ...transforms.map(([type, value]) => /** @type {[Buffer, boolean]} */ ([box(type, Buffer.from([value])), true])),
  ];
  if (grid) {
    const data = Buffer.concat([Buffer.from([0, 0, rows - 1, columns - 1]), fields([outWidth, outHeight], 2)]);
    items.push({ id: primary, type: 'grid', data, properties: [[ispeOf(outWidth, outHeight), false], ...shown] });
  } else items[0].properties.push(...shown);
  const properties = items.flatMap((item) => item.properties.map(([property]) => property));
  let index = 0;
  const ipma = fullBox(
    'ipma',
    0,
    fields([items.length], 4),
    ...items.map((item) =>
      Buffer.concat([
        fields([item.id], 2),
        Buffer.from([
          item.properties.length,
          ...item.properties.map(([, essential]) => (essential ? 0x80 : 0) | ++index),
        ]),
      ]),
    ),
  );
  const infe = items.map((item) =>
    fullBox('infe', 2, fields([item.id, 0], 2), Buffer.from(item.type, 'latin1'), Buffer.from([0])),
  );
  const iref = grid
    ? [fullBox('iref', 0, box('dimg', fields([primary, pictures.length, ...pictures.map((_, i) => i + 1)], 2)))]
    : [];
  const ftyp = box('ftyp', Buffer.from('heic', 'latin1'), fields([0], 4), Buffer.from('mif1heic', 'latin1'));
  const shared = (/** @type {{ id: number, type: string }} */ item) =>
    sharedData && item.type === 'hvc1' && item.id > 1;
  /** @param {number} mdatStart */
  const meta = (mdatStart) => {
    let offset = mdatStart + 8;
    const entries = items.map((item) => {
      const at = shared(item) ? mdatStart + 8 : offset;
      const entry = Buffer.concat([fields([item.id, 0, 1], 2), fields([at, item.data.length], 4)]);
      if (!shared(item)) offset += item.data.length;
      return entry;
    });
    return fullBox(
      'meta',
      0,
      fullBox('hdlr', 0, fields([0], 4), Buffer.from('pict', 'latin1'), Buffer.alloc(13)),
      fullBox('pitm', 0, fields([primary], 2)),
      fullBox('iinf', 0, fields([items.length], 2), ...infe),
      ...iref,
      box('iprp', box('ipco', ...properties), ipma),
      fullBox('iloc', 0, Buffer.from([0x44, 0x00]), fields([items.length], 2), ...entries),
    );
  };
  const size = meta(0).length;
  return Buffer.concat([
    ftyp,
    meta(ftyp.length + size),
    box('mdat', ...items.filter((item) => !shared(item)).map((item) => item.data)),
  ]);
}

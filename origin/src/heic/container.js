// The HEIF container of a HEIC read far enough to hand its HEVC pictures to a decoder ourselves (avcodec.js):
// the primary image, a single picture or a grid of tiles (what an iPhone writes), its size, rotation and
// mirroring, colour (nclx and ICC) and each picture's parameter sets and data. What this reader does not take
// (alpha, cropping, 10-bit, 4:4:4, an essential property it does not know, anything malformed) is `null`,
// and libheif decodes the file instead: this is a fast path, never the only one. Every read is bounds-checked;
// a hostile file throws or gives null.

/**
 * @typedef {{ type: string, start: number, body: number, end: number }} Box
 * @typedef {{ matrix: number, fullRange: boolean }} Nclx
 * @typedef {{ kind: 'rotate', quarters: number } | { kind: 'mirror', axis: number }} Transform
 *   rotate: anticlockwise quarter turns (irot); mirror: axis 0 swaps top and bottom, 1 left and right (imir)
 * @typedef {{ width: number, height: number, data: Buffer }} Picture
 *   one HEVC picture: its coded size (ispe) and its NAL units in Annex B (parameter sets first)
 * @typedef {{ width: number, height: number, columns: number, rows: number, tiles: Picture[],
 *   transforms: Transform[], nclx: Nclx | null, icc: Buffer | null }} HeifLayout
 *   width, height: the picture before the transforms (a grid's output size)
 */

const ALPHA_URNS = ['urn:mpeg:hevc:2015:auxid:1', 'urn:mpeg:mpegB:cicp:systems:auxiliary:alpha'];
const MAX_TILES = 4096;
const KNOWN_PROPERTIES = new Set(['hvcC', 'ispe', 'irot', 'imir', 'colr', 'pixi', 'auxC', 'rloc', 'lsel']);

class Unsupported extends Error {}

/** @param {boolean} ok @param {string} what */
function need(ok, what) {
  if (!ok) throw new Unsupported(what);
}

/** The boxes between `start` and `end`. @param {Buffer} b @param {number} start @param {number} end @returns {Box[]} */
function boxesIn(b, start, end) {
  const boxes = [];
  let at = start;
  while (at + 8 <= end) {
    let size = b.readUInt32BE(at);
    let header = 8;
    if (size === 1) {
      need(at + 16 <= end, 'box size');
      size = Number(b.readBigUInt64BE(at + 8));
      header = 16;
    } else if (size === 0) size = end - at;
    need(size >= header && at + size <= end, 'box size');
    boxes.push({ type: b.toString('latin1', at + 4, at + 8), start: at, body: at + header, end: at + size });
    at += size;
  }
  return boxes;
}

/** A reader of big-endian fields within [at, end). @param {Buffer} b @param {number} at @param {number} end */
function reader(b, at, end) {
  return {
    /** @param {number} bytes */
    uint(bytes) {
      need(at + bytes <= end, 'field past its box');
      let value = 0;
      for (let i = 0; i < bytes; i += 1) value = value * 256 + b[at + i];
      at += bytes;
      return value;
    },
    /** @param {number} bytes */
    skip(bytes) {
      need(at + bytes <= end, 'field past its box');
      at += bytes;
    },
    /** a NUL-terminated string */
    string() {
      const zero = b.indexOf(0, at);
      need(zero >= 0 && zero < end, 'string past its box');
      const text = b.toString('latin1', at, zero);
      at = zero + 1;
      return text;
    },
    get at() {
      return at;
    },
  };
}

/** @param {Box[]} boxes @param {string} type */
const child = (boxes, type) => boxes.find((box) => box.type === type);

/** infe v2/v3: item id -> item type. @param {Buffer} b @param {Box} iinf */
function itemTypes(b, iinf) {
  const r = reader(b, iinf.body, iinf.end);
  const version = r.uint(1);
  r.skip(3);
  r.skip(version === 0 ? 2 : 4);
  /** @type {Map<number, string>} */
  const types = new Map();
  for (const infe of boxesIn(b, r.at, iinf.end)) {
    if (infe.type !== 'infe') continue;
    const e = reader(b, infe.body, infe.end);
    const v = e.uint(1);
    e.skip(3);
    need(v >= 2, 'infe version');
    const id = e.uint(v === 2 ? 2 : 4);
    e.skip(2);
    types.set(id, b.toString('latin1', e.at, e.at + 4));
  }
  return types;
}

/** iloc: item id -> [offset, length] extents in the file. @param {Buffer} b @param {Box} iloc @param {Box | undefined} idat */
function itemLocations(b, iloc, idat) {
  const r = reader(b, iloc.body, iloc.end);
  const version = r.uint(1);
  r.skip(3);
  const sizes = r.uint(1);
  const more = r.uint(1);
  const [offsetSize, lengthSize, baseSize, indexSize] = [
    sizes >> 4,
    sizes & 15,
    more >> 4,
    version > 0 ? more & 15 : 0,
  ];
  const count = r.uint(version < 2 ? 2 : 4);
  /** @type {Map<number, Array<[number, number]>>} */
  const locations = new Map();
  for (let i = 0; i < count; i += 1) {
    const id = r.uint(version < 2 ? 2 : 4);
    const method = version > 0 ? r.uint(2) & 15 : 0;
    need(method === 0 || (method === 1 && Boolean(idat)), 'construction method');
    r.skip(2);
    const base = r.uint(baseSize) + (method === 1 && idat ? idat.body : 0);
    const extents = [];
    for (let e = r.uint(2); e > 0; e -= 1) {
      if (indexSize) r.skip(indexSize);
      const offset = base + r.uint(offsetSize);
      const length = r.uint(lengthSize);
      need(length > 0 && offset + length <= b.length, 'extent past the file');
      extents.push(/** @type {[number, number]} */ ([offset, length]));
    }
    locations.set(id, extents);
  }
  return locations;
}

/** iref: references of `kind` from each item. @param {Buffer} b @param {Box | undefined} iref @param {string} kind */
function references(b, iref, kind) {
  /** @type {Map<number, number[]>} */
  const out = new Map();
  if (!iref) return out;
  const version = b[iref.body];
  const size = version === 0 ? 2 : 4;
  for (const ref of boxesIn(b, iref.body + 4, iref.end)) {
    const r = reader(b, ref.body, ref.end);
    const from = r.uint(size);
    const to = [];
    for (let n = r.uint(2); n > 0; n -= 1) to.push(r.uint(size));
    if (ref.type === kind) out.set(from, to);
  }
  return out;
}

/** ipco's properties and ipma's associations: item id -> [{ box, essential }]. @param {Buffer} b @param {Box} iprp */
function itemProperties(b, iprp) {
  const inside = boxesIn(b, iprp.body, iprp.end);
  const ipco = child(inside, 'ipco');
  need(Boolean(ipco), 'ipco');
  const properties = boxesIn(b, /** @type {Box} */ (ipco).body, /** @type {Box} */ (ipco).end);
  /** @type {Map<number, Array<{ box: Box, essential: boolean }>>} */
  const byItem = new Map();
  for (const ipma of inside.filter((box) => box.type === 'ipma')) {
    const r = reader(b, ipma.body, ipma.end);
    const version = r.uint(1);
    const flags = r.uint(3);
    for (let n = r.uint(4); n > 0; n -= 1) {
      const id = r.uint(version < 1 ? 2 : 4);
      const list = byItem.get(id) ?? [];
      for (let a = r.uint(1); a > 0; a -= 1) {
        const value = r.uint(flags & 1 ? 2 : 1);
        const bits = flags & 1 ? 15 : 7;
        const index = value & ((1 << bits) - 1);
        if (index === 0) continue;
        need(index <= properties.length, 'property index');
        list.push({ box: properties[index - 1], essential: Boolean(value >> bits) });
      }
      byItem.set(id, list);
    }
  }
  return byItem;
}

/** ispe's width and height. @param {Buffer} b @param {Box} box */
function sizeOf(b, box) {
  const r = reader(b, box.body, box.end);
  r.skip(4);
  return { width: r.uint(4), height: r.uint(4) };
}

/**
 * hvcC: 8-bit 4:2:0 only; its parameter sets in Annex B and the NAL length size.
 * @param {Buffer} b @param {Box} box
 */
function decoderConfig(b, box) {
  const r = reader(b, box.body, box.end);
  r.skip(16);
  const chroma = r.uint(1) & 3;
  const lumaDepth = (r.uint(1) & 7) + 8;
  const chromaDepth = (r.uint(1) & 7) + 8;
  need(chroma === 1 && lumaDepth === 8 && chromaDepth === 8, '8-bit 4:2:0');
  r.skip(2);
  const lengthSize = (r.uint(1) & 3) + 1;
  need(lengthSize !== 3, 'NAL length size');
  const parts = [];
  for (let arrays = r.uint(1); arrays > 0; arrays -= 1) {
    r.skip(1);
    for (let n = r.uint(2); n > 0; n -= 1) {
      const length = r.uint(2);
      const at = r.at;
      r.skip(length);
      parts.push(START_CODE, b.subarray(at, at + length));
    }
  }
  return { parameterSets: Buffer.concat(parts), lengthSize };
}

const START_CODE = Buffer.from([0, 0, 0, 1]);

/** An item's length-prefixed NAL units in Annex B. @param {Buffer} b @param {Array<[number, number]>} extents @param {number} lengthSize */
function annexB(b, extents, lengthSize) {
  const pieces = extents.map(([offset, length]) => b.subarray(offset, offset + length));
  const data = pieces.length === 1 ? pieces[0] : Buffer.concat(pieces);
  const parts = [];
  let at = 0;
  while (at < data.length) {
    need(at + lengthSize <= data.length, 'NAL length');
    const length = data.readUIntBE(at, lengthSize);
    at += lengthSize;
    need(length > 0 && at + length <= data.length, 'NAL past its item');
    parts.push(START_CODE, data.subarray(at, at + length));
    at += length;
  }
  return parts;
}

/**
 * One coded picture: its size and its data in Annex B.
 * @param {Buffer} b @param {number} id @param {Map<number, Array<[number, number]>>} locations
 * @param {Map<number, Array<{ box: Box, essential: boolean }>>} properties @returns {Picture}
 */
function pictureOf(b, id, locations, properties) {
  const list = properties.get(id) ?? [];
  const hvcC = list.find((p) => p.box.type === 'hvcC');
  const ispe = list.find((p) => p.box.type === 'ispe');
  const extents = locations.get(id);
  need(Boolean(hvcC && ispe && extents), 'picture properties');
  const { parameterSets, lengthSize } = decoderConfig(b, /** @type {any} */ (hvcC).box);
  const { width, height } = sizeOf(b, /** @type {any} */ (ispe).box);
  const data = Buffer.concat([parameterSets, ...annexB(b, /** @type {any} */ (extents), lengthSize)]);
  return { width, height, data };
}

/** colr: nclx's matrix and range, or an ICC profile. @param {Buffer} b @param {Box[]} colrs */
function colourOf(b, colrs) {
  /** @type {Nclx | null} */
  let nclx = null;
  /** @type {Buffer | null} */
  let icc = null;
  for (const box of colrs) {
    const kind = b.toString('latin1', box.body, box.body + 4);
    if (kind === 'nclx') {
      const r = reader(b, box.body + 4, box.end);
      r.skip(4);
      nclx = { matrix: r.uint(2), fullRange: Boolean(r.uint(1) >> 7) };
    } else if (kind === 'prof' || kind === 'rICC') icc = b.subarray(box.body + 4, box.end);
  }
  return { nclx, icc };
}

/** The primary item's transforms, in the order the file lists them. @param {Buffer} b @param {Box[]} boxes @returns {Transform[]} */
function transformsOf(b, boxes) {
  /** @type {Transform[]} */
  const transforms = [];
  for (const box of boxes.filter((p) => p.type === 'irot' || p.type === 'imir')) {
    need(box.body < box.end, 'transform');
    if (box.type === 'irot') transforms.push({ kind: 'rotate', quarters: b[box.body] & 3 });
    else transforms.push({ kind: 'mirror', axis: b[box.body] & 1 });
  }
  return transforms;
}

/** Whether an auxiliary image of the primary is its alpha. @param {Buffer} b @param {number} primary @param {Map<number, number[]>} auxl @param {Map<number, Array<{ box: Box, essential: boolean }>>} properties */
function hasAlpha(b, primary, auxl, properties) {
  for (const [from, to] of auxl) {
    if (!to.includes(primary)) continue;
    const auxC = (properties.get(from) ?? []).find((p) => p.box.type === 'auxC');
    if (!auxC) return true;
    const urn = reader(b, auxC.box.body + 4, auxC.box.end).string();
    if (ALPHA_URNS.includes(urn)) return true;
  }
  return false;
}

/**
 * The grid item's data: rows, columns and output size. @param {Buffer} b @param {Array<[number, number]>} extents
 */
function gridOf(b, extents) {
  need(extents.length === 1, 'grid data');
  const [offset, length] = extents[0];
  const r = reader(b, offset, offset + length);
  r.skip(1);
  const wide = r.uint(1) & 1;
  const rows = r.uint(1) + 1;
  const columns = r.uint(1) + 1;
  return { rows, columns, width: r.uint(wide ? 4 : 2), height: r.uint(wide ? 4 : 2) };
}

/**
 * The primary image of a HEIF file as this reader takes it, or null (libheif's turn).
 * @param {Buffer} b @returns {HeifLayout | null}
 */
export function heifLayout(b) {
  try {
    return layoutOf(b);
  } catch (err) {
    if (err instanceof Unsupported || err instanceof RangeError) return null;
    throw err;
  }
}

/** @param {Buffer} b @returns {HeifLayout} */
function layoutOf(b) {
  const meta = child(boxesIn(b, 0, b.length), 'meta');
  need(Boolean(meta), 'meta');
  const inside = boxesIn(b, /** @type {Box} */ (meta).body + 4, /** @type {Box} */ (meta).end);
  const [pitm, iinf, iloc, iprp] = ['pitm', 'iinf', 'iloc', 'iprp'].map((type) => child(inside, type));
  need(Boolean(pitm && iinf && iloc && iprp), 'meta boxes');
  const primary = reader(b, /** @type {Box} */ (pitm).body, /** @type {Box} */ (pitm).end);
  const pitmVersion = primary.uint(1);
  primary.skip(3);
  const primaryId = primary.uint(pitmVersion === 0 ? 2 : 4);
  const types = itemTypes(b, /** @type {Box} */ (iinf));
  const locations = itemLocations(b, /** @type {Box} */ (iloc), child(inside, 'idat'));
  const properties = itemProperties(b, /** @type {Box} */ (iprp));
  const iref = child(inside, 'iref');
  need(!hasAlpha(b, primaryId, references(b, iref, 'auxl'), properties), 'alpha');
  const own = properties.get(primaryId) ?? [];
  need(
    own.every((p) => (!p.essential || KNOWN_PROPERTIES.has(p.box.type)) && p.box.type !== 'clap'),
    'cropping, or an essential property this reader does not know',
  );
  const { nclx, icc } = colourOf(
    b,
    own.map((p) => p.box).filter((box) => box.type === 'colr'),
  );
  const transforms = transformsOf(
    b,
    own.map((p) => p.box),
  );
  const type = types.get(primaryId);
  if (type === 'hvc1') {
    const picture = pictureOf(b, primaryId, locations, properties);
    return { ...picture, columns: 1, rows: 1, tiles: [picture], transforms, nclx, icc };
  }
  need(type === 'grid', 'primary item type');
  const grid = gridOf(b, /** @type {Array<[number, number]>} */ (locations.get(primaryId) ?? []));
  const ids = references(b, iref, 'dimg').get(primaryId) ?? [];
  need(ids.length === grid.rows * grid.columns && ids.length <= MAX_TILES, 'grid tiles');
  need(
    ids.every((id) => types.get(id) === 'hvc1'),
    'grid tile type',
  );
  // each tile's data is copied out of the file: tiles that share one extent (144 tiles naming the same 12 MB
  // copied 1.7 GB) are no camera's, and are left to libheif
  const tileBytes = ids.reduce(
    (sum, id) => sum + (locations.get(id) ?? []).reduce((bytes, [, length]) => bytes + length, 0),
    0,
  );
  need(tileBytes <= b.length, 'tiles whose data lies in the file once');
  const tiles = ids.map((id) => pictureOf(b, id, locations, properties));
  const [first] = tiles;
  need(
    tiles.every((t) => t.width === first.width && t.height === first.height),
    'tiles of one size',
  );
  need(first.width * grid.columns >= grid.width && first.height * grid.rows >= grid.height, 'tiles cover the grid');
  // and none lies wholly outside it: the tiles decoded are never much more than the image's pixels
  need(
    (grid.columns - 1) * first.width < grid.width && (grid.rows - 1) * first.height < grid.height,
    'no tile outside',
  );
  need(first.width % 2 === 0 && first.height % 2 === 0, 'tiles of even size (their chroma at whole samples)');
  return {
    width: grid.width,
    height: grid.height,
    columns: grid.columns,
    rows: grid.rows,
    tiles,
    transforms,
    nclx,
    icc,
  };
}

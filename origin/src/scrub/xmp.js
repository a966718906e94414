// XMP (an XML packet) blanked in place: the properties that say where a photograph was taken or identify its
// owner's device are overwritten with spaces, byte for byte, so the packet keeps its length (XMP packets are
// padded with whitespace anyway) and whatever holds it, at whatever offset, stays valid.
//
// A scanner, not one backtracking pattern over the packet: each pass moves forward only, so the work is
// linear in the packet's size whatever it holds (a packet of `<exif:GPSA ` repeated, or of opening tags never
// closed, once made a backtracking pattern quadratic: 45 s for 1 MB on the event loop).

/** Location and device-identifying properties, by namespace prefix as cameras, phones and editors write them. */
const PROPERTIES = [
  'exif:GPS[A-Za-z]*',
  'exifEX:(?:BodySerialNumber|LensSerialNumber|CameraOwnerName)',
  'photoshop:(?:City|State|Country)',
  'Iptc4xmpCore:(?:Location|CountryCode)',
  'Iptc4xmpExt:(?:LocationShown|LocationCreated|City|CountryName|CountryCode|ProvinceState|Sublocation|WorldRegion)',
  'aux:(?:SerialNumber|OwnerName|LensSerialNumber)',
  'drone-dji:(?:GpsLatitude|GpsLongitude|AbsoluteAltitude|RelativeAltitude)',
].join('|');
/** Whether a whole element or attribute name is one of PROPERTIES. */
const SENSITIVE = new RegExp(`^(?:${PROPERTIES})$`);
/** A sensitive opening (or empty) tag's name: the whole name, nothing read past it. */
const OPENING = new RegExp(`<(${PROPERTIES})(?![\\w.:-])`, 'g');
/** A sensitive attribute's name, after white space. */
const ATTRIBUTE = new RegExp(`\\s(?:${PROPERTIES})(?![\\w.:-])`, 'g');
/** Every closing tag, in one forward pass. */
const CLOSING = /<\/([\w.:-]+)\s*>/g;
/** An attribute's `= "value"` or `= 'value'` at lastIndex. */
const VALUE = /\s*=\s*(?:"[^"]*"|'[^']*')/y;

/**
 * Spaces over the packet's [start, end) (latin1: one character a byte); a loop, not Buffer.fill's native call,
 * which costs more than the few bytes a property holds. @param {Buffer} buf @param {number} base @param {number} start @param {number} end
 */
function blank(buf, base, start, end) {
  for (let at = base + start; at < base + end; at += 1) buf[at] = 0x20;
}

/**
 * Where each sensitive element's closing tags are, in order, and how many of them a scan has passed. One pass
 * over the packet, so finding an element's end never rescans what follows it. @param {string} text
 */
function closingTags(text) {
  /** @type {Map<string, { ends: Array<[number, number]>, passed: number }>} */
  const closings = new Map();
  for (const match of text.matchAll(CLOSING)) {
    if (!SENSITIVE.test(match[1])) continue;
    const tags = closings.get(match[1]) ?? { ends: [], passed: 0 };
    tags.ends.push([match.index, match.index + match[0].length]);
    closings.set(match[1], tags);
  }
  return closings;
}

/**
 * The sensitive elements (`<exif:GPSLatitude …/>`, `<exif:GPSLatitude>…</exif:GPSLatitude>`) blanked: an
 * opening tag with no end, or no closing tag after it, is left as it is (a reader cannot take a value from it
 * either). Returns how many. @param {string} text @param {Buffer} buf @param {number} base
 */
function blankElements(text, buf, base) {
  const closings = closingTags(text);
  let count = 0;
  let tagEnd = -1; // the first '>' at or after the tag being read, found once for every tag before it
  const opening = new RegExp(OPENING);
  for (let match = opening.exec(text); match; match = opening.exec(text)) {
    const at = match.index;
    if (tagEnd < at) tagEnd = text.indexOf('>', at);
    if (tagEnd === -1) break;
    let end = text[tagEnd - 1] === '/' ? tagEnd + 1 : -1;
    const tags = end === -1 ? closings.get(match[1]) : undefined;
    if (tags) {
      while (tags.passed < tags.ends.length && tags.ends[tags.passed][0] <= tagEnd) tags.passed += 1;
      if (tags.passed < tags.ends.length) end = tags.ends[tags.passed][1];
    }
    if (end === -1) continue;
    blank(buf, base, at, end);
    count += 1;
    opening.lastIndex = end;
  }
  return count;
}

/** The sensitive attributes (` exif:GPSLatitude="…"`) blanked. Returns how many. @param {string} text @param {Buffer} buf @param {number} base */
function blankAttributes(text, buf, base) {
  let count = 0;
  let blankedTo = 0;
  for (const match of text.matchAll(ATTRIBUTE)) {
    if (match.index < blankedTo) continue;
    VALUE.lastIndex = match.index + match[0].length;
    const value = VALUE.exec(text);
    if (!value) continue;
    blankedTo = VALUE.lastIndex;
    blank(buf, base, match.index, blankedTo);
    count += 1;
  }
  return count;
}

/**
 * The most XMP of one file that is read property by property. XMP that cameras, phones and editors write is a
 * few KB (a JPEG's standard packet is at most 64 KB); past this, a packet is emptied whole, so a file made to
 * be slow (one huge packet, or hundreds of them) costs a bounded scan, and nothing of its location survives.
 */
export const XMP_SCAN_MAX = 1024 * 1024;

/** What is left to scan of one file's XMP: one per file, handed to each blankXmp of it. */
export const xmpBudget = () => ({ left: XMP_SCAN_MAX });

/**
 * The packet in buf[start, end) with its location and device properties blanked, in place. Returns how many
 * were blanked (a packet past what is left of the file's budget is emptied: one).
 * @param {Buffer} buf @param {number} start @param {number} end @param {{ left: number }} [budget] the file's
 */
export function blankXmp(buf, start, end, budget = xmpBudget()) {
  if (end - start > budget.left) {
    budget.left = 0;
    const empty = emptyXmp(end - start);
    if (empty) empty.copy(buf, start);
    else buf.fill(0x20, start, end);
    return 1;
  }
  budget.left -= end - start;
  const text = buf.toString('latin1', start, end);
  const elements = blankElements(text, buf, start);
  // attributes are read from what the elements left
  return elements + blankAttributes(elements ? buf.toString('latin1', start, end) : text, buf, start);
}

/** An empty XMP packet of exactly `length` bytes (padded), for a packet that must keep its size. @param {number} length */
export function emptyXmp(length) {
  const packet =
    '<?xpacket begin="" id="W5M0MpCehiHzreSzNTczkc9d"?><x:xmpmeta xmlns:x="adobe:ns:meta/"/><?xpacket end="w"?>';
  return packet.length <= length
    ? Buffer.from(packet.replace('<?xpacket end', `${' '.repeat(length - packet.length)}<?xpacket end`), 'latin1')
    : null;
}

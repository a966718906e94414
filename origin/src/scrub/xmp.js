// XMP (an XML packet) blanked in place: the properties that say where a photograph was taken or identify its
// owner's device are overwritten with spaces, byte for byte, so the packet keeps its length (XMP packets are
// padded with whitespace anyway) and whatever holds it, at whatever offset, stays valid.

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
const ELEMENT = new RegExp(`<(${PROPERTIES})\\b[^>]*?(?:/>|>[\\s\\S]*?</\\1\\s*>)`, 'g');
const ATTRIBUTE = new RegExp(`\\s(?:${PROPERTIES})\\s*=\\s*(?:"[^"]*"|'[^']*')`, 'g');

/** Spaces in place of `text`, as many bytes (latin1: one character a byte). @param {string} text */
const blank = (text) => ' '.repeat(text.length);

/**
 * The packet in buf[start, end) with its location and device properties blanked, in place. Returns how many
 * were blanked. @param {Buffer} buf @param {number} start @param {number} end
 */
export function blankXmp(buf, start, end) {
  const text = buf.toString('latin1', start, end);
  let count = 0;
  const out = text
    .replace(ELEMENT, (match) => {
      count += 1;
      return blank(match);
    })
    .replace(ATTRIBUTE, (match) => {
      count += 1;
      return blank(match);
    });
  if (count) buf.write(out, start, 'latin1');
  return count;
}

/** An empty XMP packet of exactly `length` bytes (padded), for a packet that must keep its size. @param {number} length */
export function emptyXmp(length) {
  const packet =
    '<?xpacket begin="" id="W5M0MpCehiHzreSzNTczkc9d"?><x:xmpmeta xmlns:x="adobe:ns:meta/"/><?xpacket end="w"?>';
  return packet.length <= length
    ? Buffer.from(packet.replace('<?xpacket end', `${' '.repeat(length - packet.length)}<?xpacket end`), 'latin1')
    : null;
}

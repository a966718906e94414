// What an ICC profile says of itself: its colour space and its description, read with every offset and count
// bounded by the profile's size. The `icc` package read a tag count as it came: a 15 KB JPEG whose 480-byte
// profile claimed a billion tags held the origin's event loop for 46 s (#51, found by the fuzz tier).

/** The profile's description text (its `desc` tag, v2 `desc` or v4 `mluc`), or '' where it has none. @param {Buffer} profile */
function descriptionOf(profile) {
  const count = profile.readUInt32BE(128);
  // each tag's entry is 12 bytes after the header's 132: a count the profile cannot hold is not read
  if (count > (profile.length - 132) / 12) return '';
  for (let entry = 132; entry < 132 + count * 12; entry += 12) {
    if (profile.toString('latin1', entry, entry + 4) !== 'desc') continue;
    const offset = profile.readUInt32BE(entry + 4);
    const end = offset + profile.readUInt32BE(entry + 8);
    if (offset + 12 > profile.length || end > profile.length) return '';
    const type = profile.toString('latin1', offset, offset + 4);
    if (type === 'desc') {
      const length = profile.readUInt32BE(offset + 8);
      return profile.toString('latin1', offset + 12, Math.min(end, offset + 12 + length)).replace(/\0.*$/s, '');
    }
    if (type === 'mluc' && offset + 28 <= end) {
      // the first record: language, country, then its text's length and offset (UTF-16BE)
      const length = profile.readUInt32BE(offset + 20);
      const start = offset + profile.readUInt32BE(offset + 24);
      if (start + length > end || length % 2) return '';
      return profile
        .subarray(start, start + length)
        .swap16()
        .toString('utf16le');
    }
    return '';
  }
  return '';
}

/**
 * Whether an embedded profile is sRGB itself (cameras and editors tag most photographs so): an RGB profile
 * whose description names sRGB. Anything unreadable is not. @param {Buffer | undefined} profile
 */
export function isSrgbProfile(profile) {
  if (!profile || profile.length < 132 || profile.toString('latin1', 36, 40) !== 'acsp') return false;
  if (profile.toString('latin1', 16, 20).trim() !== 'RGB') return false;
  return /\bsRGB\b/.test(descriptionOf(Buffer.from(profile)));
}

import bs58 from 'bs58';

// The /p/ route carries its source URL as base58 of its UTF-8 bytes (images.hive.blog's scheme).
export const base58Url = {
  /** @param {string} url */
  encode: (url) => bs58.encode(Buffer.from(url, 'utf8')),
  /** @param {string} text @returns {string | null} */
  decode(text) {
    try {
      return Buffer.from(bs58.decode(text)).toString('utf8');
    } catch {
      return null;
    }
  },
};

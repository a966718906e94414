import { createHash } from 'node:crypto';
import bs58 from 'bs58';

// Hive's upload key: "D" + base58(multihash sha2-256 of sha256("ImageSigningChallenge" + bytes)).
export const CHALLENGE = Buffer.from('ImageSigningChallenge');

/** The hash both the key and the upload signature are made from; feed it the file's bytes. */
export function challengeHash() {
  return createHash('sha256').update(CHALLENGE);
}

/** @param {Buffer} digest sha256 of challenge + bytes */
export function keyFromDigest(digest) {
  return 'D' + bs58.encode(Buffer.concat([Buffer.from([0x12, 0x20]), digest]));
}

/** @param {Buffer} bytes */
export function keyOf(bytes) {
  return keyFromDigest(challengeHash().update(bytes).digest());
}

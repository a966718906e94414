import { secp256k1 } from '@noble/curves/secp256k1.js';
import { ripemd160 } from '@noble/hashes/legacy.js';
import bs58 from 'bs58';
import { LRUCache } from 'lru-cache';
import { HttpError } from '@stack/lib';

/** Hive's public key text: "STM" + base58(compressed key + ripemd160 checksum). @param {Uint8Array} key */
export function publicKeyString(key, prefix = 'STM') {
  const checksum = ripemd160(key).subarray(0, 4);
  return prefix + bs58.encode(Buffer.concat([key, checksum]));
}

/**
 * Recovers the signer's public key from a Hive signature: 65 bytes hex, first byte 31 + recovery id
 * (27 + id for keys that are not compressed).
 * @param {string} signatureHex @param {Uint8Array} digest sha256("ImageSigningChallenge" + bytes)
 */
export function recoverSigner(signatureHex, digest) {
  if (!/^[0-9a-f]{130}$/i.test(signatureHex)) throw new HttpError(400, 'invalid_signature', { reason: 'malformed' });
  const bytes = Buffer.from(signatureHex, 'hex');
  const recovery = bytes[0] >= 31 ? bytes[0] - 31 : bytes[0] - 27;
  if (recovery < 0 || recovery > 3) throw new HttpError(400, 'invalid_signature', { reason: 'bad recovery byte' });
  try {
    const recovered = Buffer.concat([Buffer.from([recovery]), bytes.subarray(1)]);
    return publicKeyString(secp256k1.recoverPublicKey(recovered, digest, { prehash: false }));
  } catch {
    throw new HttpError(400, 'invalid_signature', { reason: 'does not recover a key' });
  }
}

/** @typedef {(account: string, signature: string, digest: Uint8Array, authorities?: Array<'posting' | 'active'>) => Promise<void>} VerifySignature */

/**
 * Checks signatures against an account's keys on the chain: `verify(account, signature, digest,
 * authorities)` passes when a key of one of the named authorities (weight at its threshold) made it.
 * Uploads accept the posting or the active key; a preview token (POST /proxy-auth) the posting key, as
 * images.hive.blog does.
 * @param {{ call: (method: string, params: unknown) => Promise<any> }} hive
 */
export function createHiveAuth(hive) {
  // an account's keys (or that it does not exist) for a minute: a burst of uploads, or of forged ones, for
  // one account costs the Hive API one call
  /** @type {LRUCache<string, { found: any }>} */
  const accounts = new LRUCache({ max: 10_000, ttl: 60_000 });
  /** @param {string} account */
  async function lookup(account) {
    const cached = accounts.get(account);
    if (cached) return cached.found;
    let answer;
    try {
      answer = await hive.call('condenser_api.get_accounts', [[account]]);
    } catch {
      throw new HttpError(503, 'upstream_unavailable', { reason: 'hive api' }, { 'Retry-After': '10' });
    }
    const found = Array.isArray(answer) ? answer.find((entry) => entry && entry.name === account) || null : null;
    accounts.set(account, { found });
    return found;
  }
  /**
   * @param {string} account @param {string} signatureHex @param {Uint8Array} digest
   * @param {Array<'posting' | 'active'>} [authorities]
   */
  return async function verify(account, signatureHex, digest, authorities = ['posting', 'active']) {
    const signer = recoverSigner(signatureHex, digest);
    const found = await lookup(account);
    if (!found) throw new HttpError(404, 'no_such_account', { account });
    for (const authority of authorities.map((name) => found[name])) {
      const threshold = authority?.weight_threshold ?? 1;
      for (const [key, weight] of authority?.key_auths || []) {
        if (key === signer && weight >= threshold) return;
      }
    }
    throw new HttpError(403, 'invalid_signature', { reason: `not a ${authorities.join(' or ')} key of this account` });
  };
}

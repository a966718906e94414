import { secp256k1 } from '@noble/curves/secp256k1.js';
import { publicKeyString } from '../../origin/src/uploads/hive-auth.js';

/**
 * A signature as Hive clients write it: the recovery byte (31 + id, a compressed key), then r and s.
 * @param {Uint8Array} digest @param {Uint8Array} secretKey @returns {Buffer} 65 bytes (hex it for a URL)
 */
export function hiveSignature(digest, secretKey) {
  const signature = secp256k1.sign(digest, secretKey, { prehash: false, format: 'recovered' });
  return Buffer.concat([Buffer.from([signature[0] + 31]), signature.subarray(1)]);
}

/** An authority of one key, as condenser_api.get_accounts answers it. @param {Uint8Array} publicKey */
export function keyAuthority(publicKey) {
  return { weight_threshold: 1, account_auths: [], key_auths: [[publicKeyString(publicKey), 1]] };
}

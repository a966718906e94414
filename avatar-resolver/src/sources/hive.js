import { hiveMapping } from '@stack/lib';

/**
 * Hive: one condenser_api.get_accounts call for a whole batch of names.
 * @param {{ call: (method: string, params: unknown) => Promise<any> }} hive
 */
export function hiveSource(hive) {
  return {
    name: 'hive',
    /** @param {string[]} names @returns {Promise<Map<string, import('@stack/lib/src/hive-profile.js').Mapping>>} */
    async fetchMany(names) {
      const accounts = await hive.call('condenser_api.get_accounts', [names]);
      if (!Array.isArray(accounts)) throw new Error('get_accounts did not answer an array');
      return new Map(
        accounts
          .filter((account) => account && names.includes(account.name))
          .map((account) => [account.name, hiveMapping(account)]),
      );
    },
  };
}

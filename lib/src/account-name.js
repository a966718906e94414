const ACCOUNT = /^(?=.{3,16}$)[a-z][a-z0-9-]{1,}[a-z0-9](\.[a-z][a-z0-9-]{1,}[a-z0-9])*$/;

/** Hive account name rules: 3–16 chars, dot-separated segments of lowercase letters, digits and dashes. @param {string} name */
export function isAccountName(name) {
  return ACCOUNT.test(name);
}

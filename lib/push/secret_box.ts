/**
 * @module Webhook secrets sealed at rest (docs/security.md, "Webhook secrets"). A secret is kept
 * in its WEBHOOK record sealed with AES-256-GCM (WebCrypto) under the node's webhook key, so WAL
 * files, their compacted copies, backups and the records a leader ships hold no secret a reader
 * could sign with. The webhook's id is the additional data: a sealed secret opens only for the
 * webhook it was sealed for. The key is BROKER_WEBHOOK_KEY_FILE, or `<data dir>/webhook.key`
 * made on first start, or with `:memory:` a new one each start; every node of a cluster needs
 * the same one to sign after a failover.
 *
 * Sealed: u8 version (1) | key id (8 bytes: the start of SHA-256 of the key) | IV (12 bytes) |
 * ciphertext and GCM tag (16 bytes)
 */

import { ConfigError } from "../config.ts";
import type { Config } from "../config.ts";
import { FILE_MODE } from "../storage/data_dir_modes.ts";
import { syncDir, writeAll } from "../storage/wal.ts";

/** The name of the key file the broker makes in its data directory. */
export const WEBHOOK_KEY_FILE = "webhook.key";
/** Bytes of an AES-256 key. */
const KEY_BYTES = 32;
const SEALED_VERSION = 1;
const KEY_ID_BYTES = 8;
const IV_BYTES = 12;
const HEADER_BYTES = 1 + KEY_ID_BYTES + IV_BYTES;
const encoder = new TextEncoder();

/** Seals and opens webhook secrets with one key. */
export class SecretBox {
  private constructor(
    private readonly key: CryptoKey,
    private readonly keyId: Uint8Array,
    /** Where the key came from, for messages: the setting and file, or `:memory:`. */
    readonly source: string,
  ) {}

  /** A box over a raw 32-byte key. */
  static async of(raw: Uint8Array, source: string): Promise<SecretBox> {
    const bytes = raw as Uint8Array<ArrayBuffer>;
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    const key = await crypto.subtle.importKey("raw", bytes, "AES-GCM", false, [
      "encrypt",
      "decrypt",
    ]);
    return new SecretBox(key, digest.slice(0, KEY_ID_BYTES), source);
  }

  /** The key's id in hex: safe to show, it tells keys apart without giving one away. */
  get id(): string {
    return this.keyId.toHex();
  }

  /** `secret` sealed for the webhook `webhookId`. */
  async seal(secret: string, webhookId: string): Promise<Uint8Array> {
    const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
    const sealed = await crypto.subtle.encrypt(
      { name: "AES-GCM", iv, additionalData: encoder.encode(webhookId) },
      this.key,
      encoder.encode(secret),
    );
    const out = new Uint8Array(HEADER_BYTES + sealed.byteLength);
    out[0] = SEALED_VERSION;
    out.set(this.keyId, 1);
    out.set(iv, 1 + KEY_ID_BYTES);
    out.set(new Uint8Array(sealed), HEADER_BYTES);
    return out;
  }

  /** The secret sealed for webhook `webhookId`; throws, saying why and what fixes it, if not. */
  async open(sealed: Uint8Array, webhookId: string): Promise<string> {
    const cannot = `Cannot read the secret of webhook "${webhookId}"`;
    if (sealed[0] !== SEALED_VERSION || sealed.length < HEADER_BYTES) {
      throw new Error(`${cannot}: unknown sealed format ${sealed[0]}`);
    }
    const keyId = sealed.subarray(1, 1 + KEY_ID_BYTES);
    if (keyId.toHex() !== this.id) {
      throw new Error(
        `${cannot}: it was sealed with webhook key ${keyId.toHex()}, and this node has key ` +
          `${this.id} (${this.source}); give every node of a cluster the same ` +
          `BROKER_WEBHOOK_KEY_FILE, and keep the key a data directory was started with`,
      );
    }
    try {
      const plain = await crypto.subtle.decrypt(
        {
          name: "AES-GCM",
          iv: sealed.slice(1 + KEY_ID_BYTES, HEADER_BYTES),
          additionalData: encoder.encode(webhookId),
        },
        this.key,
        sealed.slice(HEADER_BYTES),
      );
      return new TextDecoder().decode(plain);
    } catch {
      throw new Error(`${cannot}: it does not open with webhook key ${this.id} (damaged)`);
    }
  }
}

/**
 * The box of this configuration's key: BROKER_WEBHOOK_KEY_FILE (which must exist: a ConfigError
 * names the setting), else `<data dir>/webhook.key` (made on first start), else with `:memory:`
 * a new key.
 */
export async function loadSecretBox(
  config: Pick<Config, "dataDir" | "webhookKeyFile">,
): Promise<SecretBox> {
  const file = config.webhookKeyFile;
  if (file) {
    let text: string;
    try {
      text = await Deno.readTextFile(file);
    } catch (e) {
      throw new ConfigError(
        `BROKER_WEBHOOK_KEY_FILE: cannot read "${file}": ${(e as Error).message}; make one ` +
          `with: openssl rand -base64 32 > ${file} && chmod 600 ${file}`,
      );
    }
    return SecretBox.of(parseKey(text, `BROKER_WEBHOOK_KEY_FILE "${file}"`), `"${file}"`);
  }
  if (config.dataDir === ":memory:") {
    return SecretBox.of(crypto.getRandomValues(new Uint8Array(KEY_BYTES)), ":memory:");
  }
  const path = `${config.dataDir}/${WEBHOOK_KEY_FILE}`;
  return SecretBox.of(parseKey(await dataDirKey(path), `"${path}"`), `"${path}"`);
}

/** The Base64 text of a key file as its 32 bytes; throws naming `what` otherwise. */
function parseKey(text: string, what: string): Uint8Array {
  let raw: Uint8Array | undefined;
  try {
    raw = Uint8Array.fromBase64(text.trim());
  } catch { /* reported below */ }
  if (raw?.length !== KEY_BYTES) {
    throw new ConfigError(
      `${what} is not a webhook key: expected ${KEY_BYTES} bytes in Base64 ` +
        `(openssl rand -base64 32)`,
    );
  }
  return raw;
}

/**
 * The text of the data dir's key file, made first when missing. Workers of one broker start
 * at once, so the key is written and synced under a name of its own, then linked into place:
 * the first link wins, and every worker reads the winner's key.
 */
async function dataDirKey(path: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  const tmp = `${path}.${crypto.randomUUID()}`;
  const key = crypto.getRandomValues(new Uint8Array(KEY_BYTES)).toBase64() + "\n";
  const file = await Deno.open(tmp, { write: true, createNew: true, mode: FILE_MODE });
  try {
    await writeAll(file, encoder.encode(key));
    await file.syncData();
  } finally {
    file.close();
  }
  try {
    await Deno.link(tmp, path);
    await syncDir(path.slice(0, path.lastIndexOf("/")) || ".");
  } catch (e) {
    if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
  } finally {
    await Deno.remove(tmp);
  }
  return await Deno.readTextFile(path);
}

/* mlgo runtime_check driver for mbedtls: SHA-256/512 of a file, AES-256-CBC,
   AES-128-CTR, AES-GCM and ChaCha20-Poly1305 over it, and modular exponentiation
   on a 1024-bit modulus derived from it. Usage: mbedtls_run FILE ROUNDS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mbedtls/aes.h"
#include "mbedtls/bignum.h"
#include "mbedtls/chachapoly.h"
#include "mbedtls/gcm.h"
#include "mbedtls/sha256.h"
#include "mbedtls/sha512.h"
#include "mlgo_read_file.h"

static void hex(const char *label, const unsigned char *b, size_t n) {
  printf("%s ", label);
  for (size_t i = 0; i < n; i++) printf("%02x", b[i]);
  printf("\n");
}

#define CHECK(x) do { int rc_ = (x); if (rc_ != 0) { \
  fprintf(stderr, "%s failed: -0x%04x\n", #x, (unsigned)-rc_); return 1; } } while (0)

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s FILE [ROUNDS]\n", argv[0]); return 2; }
  size_t len;
  char *text = read_file(argv[1], &len);
  int rounds = argc > 2 ? atoi(argv[2]) : 1;
  size_t n = len & ~(size_t)15;
  unsigned char *buf = malloc(n + 16), *out = malloc(n + 16);
  unsigned char d256[32], d512[64], tag[16], key[32], iv[16], nonce[12];
  for (int r = 0; r < rounds; r++) {
    CHECK(mbedtls_sha256_ret((const unsigned char *)text, len, d256, 0));
    CHECK(mbedtls_sha512_ret((const unsigned char *)text, len, d512, 0));
    memcpy(key, d512, 32);
    memcpy(iv, d512 + 32, 16);
    memcpy(nonce, d512 + 48, 12);
    memcpy(buf, text, n);

    mbedtls_aes_context aes;
    mbedtls_aes_init(&aes);
    CHECK(mbedtls_aes_setkey_enc(&aes, key, 256));
    unsigned char civ[16];
    memcpy(civ, iv, 16);
    CHECK(mbedtls_aes_crypt_cbc(&aes, MBEDTLS_AES_ENCRYPT, n, civ, buf, out));
    unsigned char dcbc[32];
    CHECK(mbedtls_sha256_ret(out, n, dcbc, 0));
    CHECK(mbedtls_aes_setkey_dec(&aes, key, 256));
    memcpy(civ, iv, 16);
    CHECK(mbedtls_aes_crypt_cbc(&aes, MBEDTLS_AES_DECRYPT, n, civ, out, buf));
    int cbc_ok = memcmp(buf, text, n) == 0;
    CHECK(mbedtls_aes_setkey_enc(&aes, key, 128));
    size_t off = 0;
    unsigned char ctr[16], block[16];
    memcpy(ctr, iv, 16);
    CHECK(mbedtls_aes_crypt_ctr(&aes, n, &off, ctr, block, buf, out));
    unsigned char dctr[32];
    CHECK(mbedtls_sha256_ret(out, n, dctr, 0));
    mbedtls_aes_free(&aes);

    mbedtls_gcm_context gcm;
    mbedtls_gcm_init(&gcm);
    CHECK(mbedtls_gcm_setkey(&gcm, MBEDTLS_CIPHER_ID_AES, key, 128));
    CHECK(mbedtls_gcm_crypt_and_tag(&gcm, MBEDTLS_GCM_ENCRYPT, n, nonce, 12, d256, 32,
                                    buf, out, 16, tag));
    unsigned char gcm_tag[16];
    memcpy(gcm_tag, tag, 16);
    mbedtls_gcm_free(&gcm);

    mbedtls_chachapoly_context cp;
    mbedtls_chachapoly_init(&cp);
    CHECK(mbedtls_chachapoly_setkey(&cp, key));
    CHECK(mbedtls_chachapoly_encrypt_and_tag(&cp, n, nonce, d256, 32, buf, out, tag));
    int cp_ok = mbedtls_chachapoly_auth_decrypt(&cp, n, nonce, d256, 32, tag, out, buf) == 0
                && memcmp(buf, text, n) == 0;
    mbedtls_chachapoly_free(&cp);

    /* X = G^E mod M for a 1024-bit odd M and 512-bit E taken from the digests. */
    mbedtls_mpi m, e, g, x;
    mbedtls_mpi_init(&m); mbedtls_mpi_init(&e); mbedtls_mpi_init(&g); mbedtls_mpi_init(&x);
    unsigned char mb[128];
    for (int i = 0; i < 128; i++) mb[i] = d512[i % 64] ^ (unsigned char)(i * 29);
    mb[0] |= 0x80;
    mb[127] |= 1;
    CHECK(mbedtls_mpi_read_binary(&m, mb, 128));
    CHECK(mbedtls_mpi_read_binary(&e, d512, 64));
    CHECK(mbedtls_mpi_read_binary(&g, d256, 32));
    for (int i = 0; i < 8; i++) {
      CHECK(mbedtls_mpi_exp_mod(&x, &g, &e, &m, NULL));
      CHECK(mbedtls_mpi_add_int(&g, &x, i + 2));
    }
    unsigned char xb[128];
    CHECK(mbedtls_mpi_write_binary(&x, xb, 128));
    mbedtls_mpi_free(&m); mbedtls_mpi_free(&e); mbedtls_mpi_free(&g); mbedtls_mpi_free(&x);

    if (r == rounds - 1) {
      hex("sha256", d256, 32);
      hex("sha512", d512, 64);
      hex("aes256-cbc/sha256", dcbc, 32);
      hex("aes128-ctr/sha256", dctr, 32);
      hex("aes128-gcm tag", gcm_tag, 16);
      hex("chacha20-poly1305 tag", tag, 16);
      hex("modexp", xb, 128);
      printf("cbc roundtrip %d chachapoly roundtrip %d\n", cbc_ok, cp_ok);
    }
  }
  free(buf); free(out); free(text);
  return 0;
}

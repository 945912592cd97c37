/* serving-loop: the continuous-batching loop of serving_loop.h on the first
 * OpenCL GPU (else the first device), with the program's own cl_context and
 * in-order profiling cl_command_queue handed to dsacl, as a server does.
 *
 *   serving-loop [--requests N] [--batch B] [--heads H] [--seed S]
 *
 * Prints steps per second (host wall time, one host wait per step) and the
 * device time per decode step. Exit 77 when there is no OpenCL device.
 * tests/serving_loop_check.c runs the same loop checked against the C
 * reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serving_loop.h"

int main(int argc, char **argv) {
  serving_config cfg;
  serving_config_default(&cfg);
  for (int i = 1; i + 1 < argc; i += 2) {
    const int v = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--requests")) cfg.requests = v;
    else if (!strcmp(argv[i], "--batch")) cfg.max_batch = v;
    else if (!strcmp(argv[i], "--heads")) cfg.heads = v;
    else if (!strcmp(argv[i], "--seed")) cfg.seed = (uint64_t)v;
    else {
      fprintf(stderr, "usage: serving-loop [--requests N] [--batch B] [--heads H] [--seed S]\n");
      return 2;
    }
  }
  cl_context clctx;
  cl_command_queue clq;
  cl_device_id dev;
  int rc = serving_open_cl(&clctx, &clq, &dev);
  if (rc) {
    fprintf(stderr, "serving-loop: %s\n", rc == 77 ? "no OpenCL device" : "OpenCL setup failed");
    return rc;
  }
  dsa_context *ctx = NULL;
  dsa_queue *q = NULL;
  dsa_status st = dsa_context_create_from_cl(&ctx, clctx, dev, NULL);
  if (st == DSA_OK) st = dsa_queue_create_from_cl(&q, ctx, clq);
  serving_stats stats;
  if (st == DSA_OK) st = serving_loop_run(q, &cfg, NULL, &stats, NULL);
  if (st != DSA_OK) {
    fprintf(stderr, "serving-loop: %s: %s\n", dsa_status_name(st), dsa_last_error());
  } else {
    printf("serving-loop on %s: %d requests (batch <= %d, %d heads): %d decode steps, "
           "%lld tokens decoded, %lld prefilled\n",
           dsa_context_device_name(ctx), stats.requests_done, cfg.max_batch, cfg.heads,
           stats.steps, (long long)stats.tokens_decoded, (long long)stats.tokens_prefilled);
    printf("%.1f steps/s (host wall time, one wait per step), %.1f us device time per decode "
           "step\n",
           stats.host_s > 0 ? stats.steps / stats.host_s : 0,
           stats.steps ? stats.device_us / stats.steps : 0);
  }
  dsa_queue_destroy(&q);
  dsa_context_destroy(&ctx);
  clReleaseCommandQueue(clq);
  clReleaseContext(clctx);
  return st == DSA_OK ? 0 : 1;
}

/*
 * replay.c - feeds every file of the given corpus directories (or files) to a fuzz target's
 * LLVMFuzzerTestOneInput, once each, in name order, without libFuzzer (the fuzz.replay_*
 * tests of `make test`, built with the ordinary compiler). A directory with no input fails,
 * so the test cannot pass over a corpus that went missing. Prints how many inputs it fed.
 */
#include "fuzz.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REPLAY_MAX_BYTES (1 << 20)

/* Feeds one file. Returns 0, or -1 when it cannot be read. */
static int replay_file(const char *path)
{
    static uint8_t buf[REPLAY_MAX_BYTES];
    FILE *f = fopen(path, "rb");
    size_t n;

    if (f == NULL) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    (void)LLVMFuzzerTestOneInput(buf, n);
    return 0;
}

static int replay_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Feeds every regular file of dir (names not starting with '.'). Returns the count or -1. */
static int replay_dir(const char *dir)
{
    char path[4096];
    char *names[4096];
    int n = 0, fed = 0;
    DIR *d = opendir(dir);
    struct dirent *e;

    if (d == NULL) {
        fprintf(stderr, "replay: cannot open directory %s\n", dir);
        return -1;
    }
    while ((e = readdir(d)) != NULL && n < 4096)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof(names[0]), replay_cmp);
    for (int i = 0; i < n; i++) {
        struct stat sb;

        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && replay_file(path) == 0)
            fed++;
        free(names[i]);
    }
    return fed;
}

int main(int argc, char **argv)
{
    int total = 0;

    for (int i = 1; i < argc; i++) {
        struct stat sb;
        int fed;

        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "replay: %s does not exist\n", argv[i]);
            return 1;
        }
        fed = S_ISDIR(sb.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]) == 0 ? 1 : -1;
        if (fed <= 0) {
            fprintf(stderr, "replay: no input fed from %s\n", argv[i]);
            return 1;
        }
        printf("replayed %d inputs from %s\n", fed, argv[i]);
        total += fed;
    }
    if (total == 0) {
        fprintf(stderr, "usage: replay CORPUS_DIR_OR_FILE...\n");
        return 1;
    }
    printf("PASS: %d inputs, no crash\n", total);
    return 0;
}

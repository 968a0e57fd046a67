/*
 * table.c - the one ordered table of example programs.
 *
 * The command line lists, runs and documents exactly the rows below, in this order; tests
 * reach examples through px_example_find(). Adding an example means writing its file and
 * adding one row.
 */
#include "examples.h"

#include <string.h>

extern const px_example px_example_vector;
extern const px_example px_example_matmul;
extern const px_example px_example_cholesky;
extern const px_example px_example_multi_chip;
extern const px_example px_example_allreduce;
extern const px_example px_example_moe;
extern const px_example px_example_tp_mlp;
extern const px_example px_example_train_loop;

const px_example *const px_examples[] = {
    &px_example_vector,
    &px_example_matmul,
    &px_example_cholesky,
    &px_example_multi_chip,
    &px_example_allreduce,
    &px_example_moe,
    &px_example_tp_mlp,
    &px_example_train_loop,
    NULL,
};

/* Returns the row whose name is name, or NULL. */
const px_example *px_example_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (int i = 0; px_examples[i] != NULL; i++)
        if (strcmp(px_examples[i]->name, name) == 0)
            return px_examples[i];
    return NULL;
}

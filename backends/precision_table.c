/* Writes the precision table of the engine contract (precision_of,
 * backends/engine.h) as JSON, for the scripts that judge rows by it: the
 * build leaves it in build/precisions.json. One object per precision, in
 * the enum's order, each field as the table names it. */
#include <stdio.h>

#include "backends/engine.h"

int main(void)
{
    printf("{\"precisions\": [\n");
    for (int p = 0; p < PRECISION_COUNT; p++) {
        const precision_info *row = precision_of((precision)p);
        printf("  {\"name\": \"%s\", \"arithmetic\": \"%s\", \"storage_bytes\": %d, "
               "\"mixed\": %s, \"loss_scaled\": %s, \"loss_rel\": %g, \"loss_floor\": %g, "
               "\"chain_loss_rel\": %g, \"chain_loss_floor\": %g}%s\n",
               row->name, row->arithmetic, row->storage_bytes, row->mixed ? "true" : "false",
               row->loss_scaled ? "true" : "false", row->loss_rel, row->loss_floor,
               row->chain_loss_rel, row->chain_loss_floor, p + 1 < PRECISION_COUNT ? "," : "");
    }
    printf("]}\n");
    return ferror(stdout) ? 1 : 0;
}

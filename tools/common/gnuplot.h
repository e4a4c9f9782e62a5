/* SPDX-License-Identifier: MIT */
/* Shared by the benchmark tools: is gnuplot there to draw the PNGs? */
#ifndef ZL_TOOLS_GNUPLOT_H
#define ZL_TOOLS_GNUPLOT_H

#include <stdio.h>

/* Start gnuplot for writing a script into *g (pclose it). 0; 1 when
 * gnuplot is not on PATH (a note is printed); -1 when it cannot start. */
int gnuplot_open(FILE **g);

#endif

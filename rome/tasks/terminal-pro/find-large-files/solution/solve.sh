#!/bin/bash
find /srv/data -type f -size +102400c -printf '%s %p\n' | LC_ALL=C sort -k1,1nr -k2,2 > /root/large_files.txt

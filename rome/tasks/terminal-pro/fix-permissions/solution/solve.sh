#!/bin/bash
set -e
find /srv/www -type d -exec chmod 755 {} +
find /srv/www -type f -exec chmod 644 {} +
find /srv/www -type f \( -name '*.sh' -o -path '*/bin/*' \) -exec chmod 750 {} +
find /srv/www -type f \( -name '*.key' -o -name '*.pem' \) -exec chmod 600 {} +

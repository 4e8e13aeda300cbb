printf '#!/bin/sh\necho "Hello, $(cat /app/config.txt)!"\n' > greet.sh
chmod +x greet.sh

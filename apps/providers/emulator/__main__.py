from apps.providers.emulator import main

main()

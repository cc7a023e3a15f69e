from tradehall.cli import main

main()
